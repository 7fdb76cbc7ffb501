"""Object routes: read one object, list its parts, and describe the kinds (the schema callers
filter by)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query

from api.access import ReadNs
from api.dependencies import Svc
from api.errors import ERRORS
from api.schemas import ChildrenOut, ObjectEntityOut, ObjectOut, RichObjectOut
from pipeline.retrieval.requests import (
    MAX_CHILDREN_LIMIT,
    MAX_CHILDREN_OFFSET,
    describe_schema,
)

router = APIRouter(tags=["objects"], responses=ERRORS)
# GET /v1/objects/{id}: the most entities the answer lists (the most mentioned first), and
# mentions per entity; GET /v1/entities/{id} pages the rest.
OBJECT_ENTITIES_MAX = 100
OBJECT_MENTIONS_MAX = 20


@router.get("/v1/objects/{object_id}", response_model=ObjectOut)
async def read(object_id: uuid.UUID, ns: ReadNs, svc: Svc) -> ObjectOut:
    """One object with its content and the entities it names, each with its mentions (capped:
    OBJECT_ENTITIES_MAX entities, OBJECT_MENTIONS_MAX mentions each)."""
    obj = RichObjectOut.of(await svc.engine.read(ns, object_id), with_content=True)
    found, truncated = await svc.mentions.object_entities(
        ns, object_id, max_entities=OBJECT_ENTITIES_MAX,
        max_mentions=OBJECT_MENTIONS_MAX)
    return ObjectOut(**obj.model_dump(), entities=[ObjectEntityOut.of(e) for e in found],
                     entities_truncated=truncated)


@router.get("/v1/objects/{object_id}/children", response_model=ChildrenOut)
async def children(object_id: uuid.UUID, ns: ReadNs, svc: Svc,
                   offset: Annotated[int, Query(ge=0, le=MAX_CHILDREN_OFFSET)] = 0,
                   limit: Annotated[int, Query(ge=1, le=MAX_CHILDREN_LIMIT)] = 100
                   ) -> ChildrenOut:
    """The parts of an object, in order, with their content."""
    parts = await svc.engine.children(ns, object_id, offset=offset, limit=limit)
    return ChildrenOut(objects=[RichObjectOut.of(p, with_content=True) for p in parts])


@router.get("/v1/schema")
async def schema(ns: ReadNs, svc: Svc,
                 kind: Annotated[str | None, Query(max_length=200)] = None) -> dict[str, Any]:
    """Kinds with their filterable fields, and how to filter; the catalog's relation types
    (`relations`: which are functional); the namespace's entity labels and entity edge types
    with their counts (`entities`)."""
    catalog = await svc.catalog()
    return {**describe_schema(catalog, kind),
            "relations": [r.to_dict() for r in catalog.relations],
            "entities": await svc.entities.describe(ns)}
