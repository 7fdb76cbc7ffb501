"""The read side's values and ports: what the API asks, what it gets back, and the small
interfaces through which the retrieval engine reaches Postgres, the graph and Redis.

Everything here is plain data; adapters live in `pipeline/stores/` and `pipeline/graph/`.
Every call is scoped to one namespace: a port never returns a row of another namespace, nor a
soft-deleted one.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

Scalar = str | int | float | bool
Direction = Literal["out", "in", "both"]


@dataclass(frozen=True)
class Filters:
    """Validated filters (API shape: `{kind?, title?, created_after?, ..., <property>: v|[v]}`).

    `properties` maps a property name to the accepted values (one value = eq, several = in).
    Filters apply to the promoted object (a part is judged by its parent).
    """

    kinds: tuple[str, ...] = ()
    title: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    properties: tuple[tuple[str, tuple[Scalar, ...]], ...] = ()

    @property
    def empty(self) -> bool:
        return self == Filters()


@dataclass(frozen=True)
class Hit:
    """A candidate from one channel: a searchable row (a part, or an object without parts)."""

    id: uuid.UUID
    score: float


@dataclass(frozen=True)
class Evidence:
    part_id: uuid.UUID
    title: str | None
    snippet: str
    score: float
    position: int | None
    properties: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Relation:
    type: str
    direction: Literal["out", "in"] | None
    depth: int
    source_id: uuid.UUID | None = None
    note: str | None = None
    status: str | None = None
    role: str | None = None
    confidence: float | None = None
    evidence_id: uuid.UUID | None = None


@dataclass(frozen=True)
class RichObject:
    """A hit as callers see it: never a bare id."""

    id: uuid.UUID
    kind: str
    title: str | None
    summary: str | None
    score: float
    properties: dict[str, object]
    content_type: str | None
    parent_id: uuid.UUID | None
    position: int | None
    created_at: datetime
    updated_at: datetime
    evidence: tuple[Evidence, ...] = ()
    relation: Relation | None = None
    content: str | None = None  # only on read


@dataclass(frozen=True)
class Page:
    objects: tuple[RichObject, ...]
    result_set_id: str | None
    has_more: bool
    degrade: str | None = None
    mode: str | None = None  # expand: children | neighborhood | graph | mixed


@dataclass(frozen=True)
class RowMeta:
    """What promotion and evidence need to know about a searchable row."""

    id: uuid.UUID
    parent_id: uuid.UUID | None
    position: int | None
    content: str | None
    title: str | None
    properties: dict[str, object]


@dataclass(frozen=True)
class SearchQuery:
    """`search` / `find_exact` body, validated."""

    query: str
    filters: Filters = Filters()
    limit: int = 10
    scope_ids: tuple[uuid.UUID, ...] = ()


@dataclass(frozen=True)
class ExpandQuery:
    object_ids: tuple[uuid.UUID, ...]
    relation_types: tuple[str, ...] = ()  # empty = every type
    max_hops: int = 1  # 1..4
    direction: Direction = "both"
    limit: int = 50
    want_containment: bool = True
    neighbor_budget: int | None = None  # expand_many: total neighbors; first seed claims


@dataclass(frozen=True)
class Neighbor:
    """A graph neighbor found by a walk: who, how far, over which edge, from which seed."""

    id: uuid.UUID
    depth: int
    seed_id: uuid.UUID
    relation: Relation


@dataclass(frozen=True)
class EdgeHit:
    from_id: uuid.UUID
    to_id: uuid.UUID
    relation_type: str
    score: float
    note: str | None
    status: str | None
    role: str | None
    confidence: float
    evidence_id: uuid.UUID | None


# -- ports (async: the API serves many requests per process) -------------------------------


class PartSearcher(Protocol):
    """Candidate channels over the searchable rows of one namespace (parts, and first-class
    objects without parts); filters and scope apply to the promoted object (a part's parent)."""

    async def search_lexical(self, namespace: uuid.UUID, query: str, filters: Filters,
                             scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Top k by BM25 (IDF and length normalization)."""
        ...

    async def search_trigram(self, namespace: uuid.UUID, query: str, filters: Filters,
                             scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Top k by trigram word similarity (near-spellings, codes)."""
        ...

    async def search_dense(self, namespace: uuid.UUID, vector: Sequence[float],
                           filters: Filters, scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Top k by cosine similarity; a selective filter never starves the result."""
        ...

    async def exact_matches(self, namespace: uuid.UUID, query: str, filters: Filters,
                            scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Equality matches first: id, title, property value, quoted phrase."""
        ...

    async def row_meta(self, namespace: uuid.UUID, ids: Sequence[uuid.UUID]
                       ) -> dict[uuid.UUID, RowMeta]:
        """Parent, position, text of searchable rows (for promotion and snippets)."""
        ...


class ObjectReader(Protocol):
    """Hydration and reads of visible objects of one namespace (others are absent, not errors)."""

    async def hydrate(self, namespace: uuid.UUID, ids: Sequence[uuid.UUID], *,
                      with_content: bool = False) -> dict[uuid.UUID, RichObject]:
        ...

    async def children(self, namespace: uuid.UUID, parent_id: uuid.UUID, *, offset: int = 0,
                       limit: int = 100) -> list[RichObject]:
        """Visible parts of a parent, by position."""
        ...

    async def siblings(self, namespace: uuid.UUID, part_id: uuid.UUID, *, radius: int
                       ) -> list[RichObject]:
        """The parts within `radius` positions of a part (itself excluded), by position."""
        ...


class GraphReader(Protocol):
    """Entity, edge and neighborhood queries on the graph projection of one namespace.
    Every id it returns must still be hydrated from Postgres before anyone sees it."""

    async def find_entities_text(self, namespace: uuid.UUID, query: str,
                                 kinds: Sequence[str], k: int) -> list[Hit]: ...

    async def find_entities_vector(self, namespace: uuid.UUID, vector: Sequence[float],
                                   kinds: Sequence[str], k: int) -> list[Hit]: ...

    async def find_edges(self, namespace: uuid.UUID, relation_type: str, query: str,
                         k: int) -> list[EdgeHit]: ...

    async def neighbors(self, namespace: uuid.UUID, seeds: Sequence[uuid.UUID],
                        relation_types: Sequence[str], direction: Direction, max_hops: int,
                        limit: int) -> list[Neighbor]:
        """Nodes within `max_hops` of the seeds (seeds excluded), nearest first; each reached
        node once, claimed by the first seed (in `seeds` order) that reaches it."""
        ...


class ResultSetStore(Protocol):
    """Deterministic snapshots of ranked lists, shared by every API process (Redis, with TTL)."""

    async def save(self, namespace: uuid.UUID, items: Sequence[dict[str, object]],
                   meta: dict[str, object]) -> str: ...

    async def load(self, namespace: uuid.UUID, result_set_id: str
                   ) -> tuple[list[dict[str, object]], dict[str, object]] | None: ...
