"""Search, exact find, `continue` and object reads: their bodies and answers, and the error
body every endpoint answers with (the API's `api/schemas.py`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import ConfigDict, Field

from brainstream_client.models.base import Answer, Body

SearchMode = Literal["hybrid", "ppr", "auto"]
Scalar = str | int | float | bool


class ErrorDetail(Answer):
    code: str
    message: str
    field: str | None = None


class ErrorOut(Answer):
    error: ErrorDetail


class FiltersBody(Body):
    """`kind`, `title`, the date bounds, and any property: a scalar (equal) or a non-empty
    list (one of), e.g. `FiltersBody(kind="deal", stage=["prospect", "won"])`."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, Scalar | list[Scalar]]

    kind: str | list[str] | None = None
    title: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None


class PprFusionBody(Body):
    """PPR's knobs for one search (modes ppr and auto); None: the wired value."""

    damping: float | None = None
    list_weight: float | None = None
    passage_seed_weight: float | None = None
    rrf_k: int | None = None


class FusionBody(Body):
    """A search's own fusion, e.g. `FusionBody(weights={"dense": 2}, rrf_k=30)`; None: the
    wired value. An unknown channel or a value out of bounds is an `ApiError` naming it."""

    weights: dict[str, float] | None = None
    rrf_k: int | None = None
    ppr: PprFusionBody | None = None
class FacetBody(Body):
    """One facet: `field` (`kind`, `created_at`, `updated_at` or `$.<property>`), `size`
    (values or buckets returned), `interval` (a number, or day|week|month|year)."""

    field: str
    size: int = 10
    interval: float | str | None = None


class SortBody(Body):
    """`field`: relevance, updated_at, created_at, title, position or `$.<property>`;
    `order`: asc | desc (default desc for relevance and the times, asc otherwise)."""

    field: str = "relevance"
    order: Literal["asc", "desc"] | None = None


class FindExactBody(Body):
    query: str
    filters: FiltersBody | None = None
    limit: int = 10
    scope_ids: list[UUID] | None = None
    strict: bool = False
    facets: list[FacetBody] | None = None
    sort: SortBody | None = None
    where: dict[str, Any] | None = None


class VectorBody(Body):
    model: str
    values: list[float] = Field(min_length=1, max_length=16000)


class SearchBody(FindExactBody):
    query: str | None = None  # type: ignore[assignment]
    mode: SearchMode = "hybrid"
    explain: bool = False
    rerank: bool | None = None
    fusion: FusionBody | None = None
    similar_to: UUID | None = None
    min_score: float | None = Field(default=None, ge=-1.0, le=1.0)
    vector: VectorBody | None = None
    as_of: datetime | None = None
    known_at: datetime | None = None
    from_messages: list[UUID] | None = None


class ContinueBody(Body):
    result_set_id: str
    limit: int = 10


class EvidenceOut(Answer):
    part_id: UUID
    title: str | None
    snippet: str
    score: float
    position: int | None
    properties: dict[str, Any]
    highlights: list[tuple[int, int]] = Field(default_factory=list)


class RelationOut(Answer):
    type: str
    direction: Literal["out", "in"] | None
    depth: int
    source_id: UUID | None = None
    note: str | None = None
    status: str | None = None
    role: str | None = None
    confidence: float | None = None
    evidence_id: UUID | None = None
    valid_from: datetime | None = None  # an as-of read: when the link's version held
    valid_to: datetime | None = None


class RichObjectOut(Answer):
    """An object or part in a ranked answer, with the evidence that ranked it."""

    id: UUID
    kind: str
    title: str | None
    summary: str | None
    score: float
    properties: dict[str, Any]
    content_type: str | None
    parent_id: UUID | None
    position: int | None
    evidence: list[EvidenceOut]
    relation: RelationOut | None
    created_at: datetime
    updated_at: datetime
    content: str | None = None


class PageOut(Answer):
    """One page of a ranked answer; `has_more` with `result_set_id` means `continue` has
    more (the client's `iter_objects` follows it)."""

    objects: list[RichObjectOut]
    result_set_id: str | None
    has_more: bool
    degrade: str | None = None
    mode: str | None = None
    truncated: bool = False
    explain: dict[str, Any] | None = None
    facets: dict[str, Any] | None = None


class MentionOut(Answer):
    row_id: UUID
    field: Literal["title", "summary", "content"]
    start: int
    end: int
    text: str


class ObjectEntityOut(Answer):
    entity_id: UUID
    name: str
    label: str
    mention_count: int
    mentions: list[MentionOut]


class ObjectOut(RichObjectOut):
    """One object read in full: its content and the entities it names."""

    entities: list[ObjectEntityOut] = Field(default_factory=list)
    entities_truncated: bool = False


class ChildrenOut(Answer):
    objects: list[RichObjectOut]


class MeOut(Answer):
    """Who the caller's key is: its name, its namespaces (name one with X-Namespace when there
    are several) with the scopes it holds on each (implied ones included: read < write <
    admin), and whether it may read the operator's status."""

    name: str
    namespaces: list[str]
    scopes: dict[str, list[Literal["read", "write", "admin"]]]
    operator: bool
