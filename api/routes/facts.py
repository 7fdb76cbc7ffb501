"""`GET /v1/entities/{id}/facts`: the RELATES facts naming an entity that hold at a world time
(`as_of`) as the system knew them at `known_at` (both default to now)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import AwareDatetime

from api.access import ReadNs
from api.dependencies import Svc
from api.errors import ERRORS
from api.fact_schemas import FactEndOut, FactOut, FactsOut, StatingRowOut
from pipeline.domain.errors import NotFound
from pipeline.entities.store import resolution as store
from pipeline.entities.store.fact_reads import entity_facts
from pipeline.postgres.plans import arun
from pipeline.postgres.pool import read_connection

router = APIRouter(tags=["entities"], responses=ERRORS)

FACTS_MAX = 500  # facts one answer lists (then `truncated`)
MAX_HOPS = 10  # merged_into followed at most this far


@router.get("/v1/entities/{entity_id}/facts", response_model=FactsOut)
async def read_facts(entity_id: uuid.UUID, ns: ReadNs, svc: Svc,
                     as_of: Annotated[AwareDatetime | None, Query(
                         description="World time (RFC 3339 with an offset); default now")] = None,
                     known_at: Annotated[AwareDatetime | None, Query(
                         description="System time: as the system knew it then; default now"
                     )] = None) -> FactsOut:
    """The entity's facts (as subject or object) holding at `as_of` as known at `known_at`,
    each with its predicate, the other entity, its validity and the rows stating it; a merged
    entity answers with its survivor's."""
    now = datetime.now(UTC)
    w, k = as_of or now, known_at or now
    async with read_connection(svc.pool) as conn:
        current = entity_id
        for _ in range(MAX_HOPS + 1):
            found = (await arun(conn, store.entities(ns, [current]))).get(current)
            if found is None:
                raise NotFound(f"no entity {entity_id} in this namespace", field="entity_id")
            if found.merged_into is None:
                break
            current = found.merged_into
        facts = await entity_facts(conn, ns, current, w, k, FACTS_MAX + 1)
    return FactsOut(entity_id=current, as_of=w, known_at=k, truncated=len(facts) > FACTS_MAX,
                    facts=[FactOut(
                        subject=FactEndOut(id=f.subject.id, name=f.subject.name,
                                           label=f.subject.label),
                        predicate=f.predicate,
                        object=FactEndOut(id=f.object.id, name=f.object.name,
                                          label=f.object.label),
                        valid_from=f.valid_from, valid_to=f.valid_to, recorded_at=f.recorded_at,
                        stated_by=[StatingRowOut(row_id=r, object_id=o) for r, o in f.rows])
                        for f in facts[:FACTS_MAX]])
