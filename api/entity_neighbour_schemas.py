"""What `GET /v1/entities/{id}` adds to an entity (`api/resolution_schemas.py: EntityOut`): the
labels its mentions carry and its strongest neighbours. A module of its own: the entity page's
other bodies (`api/entity_page_schemas.py`) build on the resolution ones."""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, Field

from pipeline.entities.store.pages import Neighbour


class LabelCount(BaseModel):
    label: str
    count: int = Field(description="mentions in live rows carrying the label")


class NeighbourOut(BaseModel):
    """An entity joined to this one by an edge."""

    entity_id: uuid.UUID
    name: str
    label: str
    edge_type: Literal["CO_OCCURS", "RELATES", "POSSIBLY_SAME"] = Field(description=(
        "CO_OCCURS (named in the same rows: weight = rows), RELATES (a stated relation: "
        "`predicate`, weight = rows stating it), POSSIBLY_SAME (verified by a person)"))
    predicate: str | None = None
    direction: Literal["out", "in"] | None = Field(default=None, description=(
        "RELATES: `out` when this entity is the subject, `in` when the object"))
    weight: float

    @classmethod
    def of(cls, n: Neighbour) -> NeighbourOut:
        return cls(entity_id=n.entity_id, name=n.name, label=n.label,
                   edge_type=n.edge_type,
                   predicate=n.predicate,
                   direction=("out" if n.outgoing else "in") if n.edge_type == "RELATES"
                   else None, weight=n.weight)
