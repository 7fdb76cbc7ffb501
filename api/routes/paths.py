"""Entity graph routes: `POST /v1/paths`, the k best paths between objects and entities with
the evidence of every edge."""

from __future__ import annotations

from fastapi import APIRouter

from api.access import ReadNs
from api.asof_schemas import as_of_point
from api.dependencies import Svc
from api.entity_schemas import PathsBody, PathsOut
from api.errors import ERRORS
from pipeline.domain.paths import PathQuery

router = APIRouter(tags=["graph"], responses=ERRORS)


@router.post("/v1/paths", response_model=PathsOut)
async def paths(body: PathsBody, ns: ReadNs, svc: Svc) -> PathsOut:
    """The k best paths (fewest hops, then strongest) from any of `from` to any of `to`, over
    links between objects, MENTIONS between objects and entities, and CO_OCCURS, RELATES and
    verified POSSIBLY_SAME edges between entities; each edge cites what states it. `status`
    and `cut_by` say how the search ended when it found nothing or a bound cut it. With
    `as_of` and/or `known_at`, the links are those that held then, as known then."""
    query = PathQuery(tuple(body.sources), tuple(body.targets), body.max_hops, body.k,
                      as_of_point(body.as_of, body.known_at))
    return PathsOut.of(await svc.paths.find(ns, query))
