"""History routes: the versions of a link and of an object, with the events that made them."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query

from api.access import ReadNs
from api.dependencies import Svc
from api.errors import ERRORS
from api.history_schemas import LinkHistoryOut, ObjectHistoryOut, ObjectVersionOut
from pipeline.domain.relations import RELATION_TYPE_PATTERN
from pipeline.retrieval.store.history import PgHistoryReader

router = APIRouter(tags=["history"], responses=ERRORS)


@router.get("/v1/links/history", response_model=LinkHistoryOut, response_model_by_alias=True)
async def link_history_by_ends(
        ns: ReadNs, svc: Svc,
        from_id: Annotated[uuid.UUID, Query(alias="from")],
        relation_type: Annotated[str, Query(alias="type", pattern=RELATION_TYPE_PATTERN)],
        to: uuid.UUID) -> LinkHistoryOut:
    """Every version of the link (from, type, to), in the order written: when it held in the
    world, when the system believed it, and the events that wrote and retired each."""
    return LinkHistoryOut.of(await PgHistoryReader(svc.pool).link(ns, from_id, relation_type, to))


@router.get("/v1/links/{link_id}/history", response_model=LinkHistoryOut,
            response_model_by_alias=True)
async def link_history(link_id: uuid.UUID, ns: ReadNs, svc: Svc) -> LinkHistoryOut:
    """Every version of the link with this id (a name-based UUID of from, type and to), in the
    order written."""
    return LinkHistoryOut.of(await PgHistoryReader(svc.pool).link_by_id(ns, link_id))


@router.get("/v1/objects/{object_id}/history", response_model=ObjectHistoryOut)
async def object_history(object_id: uuid.UUID, ns: ReadNs, svc: Svc) -> ObjectHistoryOut:
    """Every version of a first-class object (each put, delete or revival that changed it), in
    order, with its event."""
    versions = await PgHistoryReader(svc.pool).object(ns, object_id)
    return ObjectHistoryOut(object_id=object_id,
                            versions=[ObjectVersionOut.of(v) for v in versions])
