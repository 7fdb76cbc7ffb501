"""Entity pages and the curator's queue: an entity's mentions a page at a time
(`GET /v1/entities/{id}/mentions`), entity search by name through the resolver's layers
(`POST /v1/entities/search`) and the POSSIBLY_SAME pairs of one status with their evidence
(`GET /v1/entities/possibly_same`). Reads, for any key of the namespace; deciding a pair is
`POST /v1/entities/possibly_same/{from}/{to}` (`api/routes/entities.py`, admin keys).

`app.py` includes this router before the entity routes: `/v1/entities/possibly_same` must be
matched before `/v1/entities/{entity_id}` would refuse it as an id.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from typing import Annotated

from fastapi import APIRouter, Query

from api.access import ReadNs
from api.dependencies import Svc
from api.entity_page_schemas import (
    EntitySearchBody,
    EntitySearchHit,
    EntitySearchOut,
    MentionOut,
    MentionsOut,
    PairOut,
    PairsOut,
    PairStatus,
)
from api.errors import ERRORS
from pipeline.domain.errors import NotFound, Unavailable
from pipeline.entities.pages import decode_cursor, encode_cursor
from pipeline.entities.resolving import ResolveConfig, resolve
from pipeline.entities.store import pages
from pipeline.postgres.plans import arun
from pipeline.postgres.pool import read_connection
from pipeline.wiring.services import query_embedder

router = APIRouter(tags=["entities"], responses=ERRORS)

EMBED_TIMEOUT = 5.0  # seconds: past it, search skips the embedding layer and still answers
# Evidence per pair in the queue: enough to decide on, little enough for a page of 50 pairs.
PAIR_ALIASES = 10
PAIR_CONTEXTS = 3
PAIR_SHARED = 5


@router.get("/v1/entities/possibly_same", response_model=PairsOut, response_model_by_alias=True)
async def list_pairs(ns: ReadNs, svc: Svc,
                     status: Annotated[PairStatus, Query(description=(
                         "held (the curator's queue), deferred, verified or refused"))] = "held",
                     limit: Annotated[int, Query(ge=1, le=50)] = 20,
                     cursor: Annotated[str | None, Query(max_length=500)] = None) -> PairsOut:
    """The namespace's POSSIBLY_SAME pairs of one status, most confident first, each with its
    evidence: both entities (name, label, aliases, part count, a few mentions with snippets)
    and the entities both are joined to."""
    after = decode_cursor(cursor, pages.PAIR_KEY) if cursor else None
    async with read_connection(svc.pool) as conn:
        found = await arun(conn, pages.pairs(ns, status, limit + 1, after,
                                             aliases=PAIR_ALIASES, contexts=PAIR_CONTEXTS,
                                             shared=PAIR_SHARED))
    shown = found[:limit]
    return PairsOut(status=status, pairs=[PairOut.of(p) for p in shown],
                    cursor=encode_cursor(shown[-1].key) if len(found) > limit else None)


@router.get("/v1/entities/{entity_id}/mentions", response_model=MentionsOut)
async def entity_mentions(entity_id: uuid.UUID, ns: ReadNs, svc: Svc,
                          limit: Annotated[int, Query(ge=1, le=100)] = 20,
                          cursor: Annotated[str | None, Query(max_length=500)] = None
                          ) -> MentionsOut:
    """The mentions of an entity in live objects and parts, in (object, row, field, span)
    order, with a snippet around each; a merged id pages its survivor's."""
    after = decode_cursor(cursor, pages.MENTION_KEY) if cursor else None
    async with read_connection(svc.pool) as conn:
        found = await arun(conn, pages.survivor(ns, entity_id))
        if found is None:
            raise NotFound(f"no entity {entity_id} in this namespace", field="entity_id")
        rows = await arun(conn, pages.mentions(ns, found.id, limit + 1, after))
    shown = rows[:limit]
    return MentionsOut(entity_id=found.id, mentions=[MentionOut.of(m) for m in shown],
                       cursor=encode_cursor(shown[-1].key) if len(rows) > limit else None)


@router.post("/v1/entities/search", response_model=EntitySearchOut)
async def search_entities(body: EntitySearchBody, ns: ReadNs, svc: Svc) -> EntitySearchOut:
    """Entities named like `query`, best first, each with the resolver layer that found it and
    its confidence (exact, alias, fold, ..., spelling, embedding: docs/entities.md)."""
    config = ResolveConfig.from_settings(svc.settings)
    config = replace(config, pool=max(config.pool, body.limit * 4),
                     resolver=replace(config.resolver, candidates=body.limit * 2))
    skipped: list[str] = []
    try:
        vector = await asyncio.wait_for(
            query_embedder(lambda: svc.name_embedder)(body.query), EMBED_TIMEOUT)
    except (Unavailable, TimeoutError):
        vector, skipped = None, ["embedding: the query embedder is unavailable"]
    async with read_connection(svc.pool) as conn:
        answer = await arun(conn, resolve(ns, body.query, config, vector=vector,
                                          labels=body.labels, skipped=skipped))
    # an entity no live row names any more is the name of deleted content: not shown
    hits = [c for c in answer.candidates if c.part_count > 0][:body.limit]
    return EntitySearchOut(query=body.query, entities=[EntitySearchHit.of(c) for c in hits],
                           skipped=answer.skipped)
