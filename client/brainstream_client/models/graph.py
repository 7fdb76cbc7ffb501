"""Entity and link find, graph expansion, expand recipes and paths: their bodies and answers
(the API's `api/schemas.py` and `api/entity_schemas.py`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import Field

from brainstream_client.models.base import Answer, Body
from brainstream_client.models.read import FiltersBody, PageOut

Direction = Literal["out", "in", "both"]


class FindObjectsBody(Body):
    query: str
    kinds: list[str] | None = None
    filters: FiltersBody | None = None
    limit: int = 10
    include_entities: bool = False
    where: dict[str, Any] | None = None


class EntityHitOut(Answer):
    type: Literal["entity"] = "entity"
    id: UUID
    name: str
    label: str
    part_count: int
    matched: str
    via: str | None = None
    score: float


class FindObjectsOut(PageOut):
    """A page of objects and, when asked (`include_entities`), the entities named like the
    query."""

    entities: list[EntityHitOut] | None = None
class FindLinksBody(Body):
    relation_type: str
    query: str
    limit: int = 10
    as_of: datetime | None = None  # world time: the links that held then
    known_at: datetime | None = None  # system time: as known then


class ExpandBody(Body):
    object_id: UUID
    relation_types: list[str] | None = None
    max_hops: int = 1
    direction: Direction = "both"
    limit: int = 20
    want_containment: bool = True
    as_of: datetime | None = None  # world time: the links that held then
    known_at: datetime | None = None  # system time: as known then


class ExpandManyBody(Body):
    object_ids: list[UUID]
    relation_types: list[str] | None = None
    max_hops: int = 1
    direction: Direction = "both"
    neighbor_budget: int = 50
    limit: int = 20
    want_containment: bool = False
    as_of: datetime | None = None  # world time: the links that held then
    known_at: datetime | None = None  # system time: as known then


class RecipeBody(Body):
    """A named expand template: the expand fields without the objects."""

    relation_types: list[str] | None = None
    max_hops: int = 1
    direction: Direction = "both"
    limit: int = 20
    want_containment: bool = True
    neighbor_budget: int | None = None


class RecipeOut(Answer):
    name: str
    source: Literal["namespace", "default"]
    spec: RecipeBody


class RecipeListOut(Answer):
    recipes: list[RecipeOut]


class RecipeRunBody(Body):
    object_ids: list[UUID]
    limit: int | None = None
    as_of: datetime | None = None  # world time: the links that held then
    known_at: datetime | None = None  # system time: as known then


class PathsBody(Body):
    """Paths from any of `from` to any of `to` (objects or entities)."""

    from_: list[UUID] = Field(alias="from")
    to: list[UUID]
    max_hops: int = 4
    k: int = 3
    as_of: datetime | None = None  # world time: the links that held then
    known_at: datetime | None = None  # system time: as known then


class Citation(Answer):
    row_id: UUID | None = None
    object_id: UUID | None = None
    field: str | None = None
    start: int | None = None
    end: int | None = None
    text: str | None = None
    snippet: str | None = None
    note: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None


class NodeOut(Answer):
    type: Literal["object", "entity", "message"]
    id: UUID
    kind: str | None = None
    title: str | None = None
    name: str | None = None
    label: str | None = None
    part_count: int | None = None
    session_id: str | None = None
    role: str | None = None


class PathEdgeOut(Answer):
    type: Literal["LINK", "MENTIONS", "CO_OCCURS", "RELATES", "POSSIBLY_SAME"]
    relation_type: str | None = None
    predicate: str | None = None
    from_id: UUID
    to_id: UUID
    forward: bool
    weight: float
    strength: float
    evidence: list[Citation]


class PathOut(Answer):
    hops: int
    strength: float
    nodes: list[NodeOut]
    edges: list[PathEdgeOut]


class HubOut(Answer):
    id: UUID
    name: str
    part_count: int


class PathsOut(Answer):
    paths: list[PathOut]
    status: Literal["found", "connected_beyond_max_length", "no_path_within_max_length",
                    "not_connected", "search_incomplete"]
    search_incomplete: bool
    cut_by: list[str]
    hubs_skipped: list[HubOut]
    shortest_beyond: int | None = None
    explored_nodes: int
    explored_edges: int
