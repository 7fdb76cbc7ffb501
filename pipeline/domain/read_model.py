"""The read side's values: what the API asks and what it gets back (plain data, no I/O).

The ports that produce them are in `pipeline/ports.py`; every call is scoped to one namespace.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from pipeline.domain.conditions import Condition

Scalar = str | int | float | bool
Direction = Literal["out", "in", "both"]
# How `search` ranks: the hybrid channels alone, fused with PPR over the entity layer, or PPR
# only when the query names a usable entity (pipeline/retrieval/ppr/multihop.py).
SearchMode = Literal["hybrid", "ppr", "auto"]
SEARCH_MODES: tuple[SearchMode, ...] = ("hybrid", "ppr", "auto")
# How far an expansion may walk the graph (one round trip per hop).
MAX_HOPS = 4


@dataclass(frozen=True)
class Filters:
    """Validated filters (API shape: `{kind?, title?, created_after?, ..., <property>: v|[v]}`).

    `properties` maps a property name to the accepted values (one value = eq, several = in);
    `where` is the structured condition on properties (ranges, exists, not, and/or).
    Filters apply to the promoted object (a part is judged by its parent).
    """

    kinds: tuple[str, ...] = ()
    title: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    properties: tuple[tuple[str, tuple[Scalar, ...]], ...] = ()
    # the request's `where` (pipeline/domain/conditions.py), on the promoted object's properties
    where: Condition | None = None

    @property
    def empty(self) -> bool:
        return self == Filters()

    @classmethod
    def of_body(cls, kind: str | Sequence[str] | None, title: str | None,
                created_after: datetime | None, created_before: datetime | None,
                updated_after: datetime | None, updated_before: datetime | None,
                properties: Mapping[str, Scalar | Sequence[Scalar]] | None) -> Filters:
        """Filters from the API's `filters` shape (a kind or a list; each property a value,
        eq, or a list, in), properties in name order."""
        kinds = (kind,) if isinstance(kind, str) else tuple(kind or ())
        props = tuple((name, tuple(value) if isinstance(value, list | tuple) else (value,))
                      for name, value in sorted((properties or {}).items()))
        return cls(kinds=kinds, title=title, created_after=created_after,
                   created_before=created_before, updated_after=updated_after,
                   updated_before=updated_before, properties=props)


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
    # [start, end) character offsets into `snippet` of the query's words
    highlights: tuple[tuple[int, int], ...] = ()


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
    # an as-of read: when the link's version held in the world (None: always / still)
    valid_from: datetime | None = None
    valid_to: datetime | None = None


@dataclass(frozen=True)
class AsOf:
    """The point an as-of read answers at: world time `world` (None: now) as the system knew
    it at `known` (None: as known now). A link counts when one of its versions holds there
    (`pipeline/retrieval/store/link_versions.py`)."""

    world: datetime | None = None
    known: datetime | None = None

    @classmethod
    def of(cls, as_of: datetime | None, known_at: datetime | None, now: datetime
           ) -> AsOf | None:
        """The point a request names, or None when it names neither time (the current
        state); a `known_at` after `now` is now (nothing is known from the future)."""
        if as_of is None and known_at is None:
            return None
        return cls(as_of, None if known_at is None or known_at >= now else known_at)


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
    # a bound (a result set's size, expansion's neighbour bound, find_objects' candidate bound)
    # cut the answer: more may exist
    truncated: bool = False
    # search with `explain`: how the answer was ranked (first page only)
    explain: dict[str, object] | None = None
    # search / find_exact with `facets`: counts over the match set (first page only)
    facets: dict[str, object] | None = None


@dataclass(frozen=True)
class RowMeta:
    """What fusion, promotion and decay need to know about a searchable row: the object it
    promotes to (its parent, or itself) and when that object last changed (None: not read).
    Texts are read for the returned page only (`ResultPager.materialize`)."""

    id: uuid.UUID
    parent_id: uuid.UUID | None
    updated_at: datetime | None = None


# How a date facet buckets its values.
DateInterval = Literal["day", "week", "month", "year"]
DATE_INTERVALS: tuple[DateInterval, ...] = ("day", "week", "month", "year")


@dataclass(frozen=True)
class FacetSpec:
    """One facet of a search (`pipeline/retrieval/matchset.py`): counts of the match set's
    objects per value of `field` (`kind`, `created_at`, `updated_at` or a property `$.name`):
    the `size` most frequent values, or buckets of width `interval` (a number, or a
    DateInterval for dates)."""

    field: str
    size: int = 10
    interval: float | DateInterval | None = None


@dataclass(frozen=True)
class SortSpec:
    """The order of a search's answer: `relevance` (the default), `updated_at`, `created_at`,
    `title`, `position` or a property `$.name`; `order` None takes the field's default (desc
    for relevance and the times, asc otherwise)."""

    field: str = "relevance"
    order: Literal["asc", "desc"] | None = None


@dataclass(frozen=True)
class FusionParams:
    """A search's own fusion knobs (`fusion`); None (and a channel not named): the wired value
    (`pipeline.retrieval.tuning` checks them)."""

    weights: tuple[tuple[str, float], ...] = ()  # channel name -> its vote in RRF
    rrf_k: int | None = None
    ppr_damping: float | None = None
    ppr_list_weight: float | None = None  # the PPR list's vote against the hybrid list's 1
    ppr_passage_seed_weight: float | None = None  # the first stage's rows as weak seeds
    ppr_rrf_k: int | None = None


@dataclass(frozen=True)
class SearchQuery:
    """`search` / `find_exact` body, validated."""

    query: str
    filters: Filters = Filters()
    limit: int = 10
    scope_ids: tuple[uuid.UUID, ...] = ()
    mode: SearchMode = "hybrid"  # search only; find_exact ignores it
    explain: bool = False
    # search only: re-rank the fused top objects (None: when a reranker is configured)
    rerank: bool | None = None
    # refuse (DegradedAnswer, 503) rather than answer degraded
    strict: bool = False
    fusion: FusionParams | None = None  # search only
    facets: tuple[FacetSpec, ...] = ()
    sort: SortSpec | None = None  # None: by relevance
    # search only (pipeline/retrieval/similar.py): more like this object; a cosine floor on the
    # dense channel (a range search); the dense channel's query vector, given by the caller
    similar_to: uuid.UUID | None = None
    min_score: float | None = None
    vector: QueryVector | None = None
    # search only, modes ppr / auto: the walk's RELATES facts as they count at (world time,
    # system time); None: the present, as known now
    facts_at: tuple[datetime, datetime] | None = None
    # search only: conversation messages whose entities join the PPR seeds (runs PPR)
    from_messages: tuple[uuid.UUID, ...] = ()


@dataclass(frozen=True)
class QueryVector:
    """A caller's vector: the model that computed it (checked against the generation's) and its
    values."""

    model: str
    values: tuple[float, ...]


@dataclass(frozen=True)
class Likeness:
    """What "more like this" searches with: the object's vector (None: not embedded yet), its
    lexemes with their frequencies, and the rows never to answer (the object's own)."""

    vector: tuple[float, ...] | None
    terms: dict[str, int]
    exclude: frozenset[uuid.UUID]


@dataclass(frozen=True)
class ExpandQuery:
    object_ids: tuple[uuid.UUID, ...]
    relation_types: tuple[str, ...] = ()  # empty = every type
    max_hops: int = 1  # 1..4
    direction: Direction = "both"
    limit: int = 50
    want_containment: bool = True
    neighbor_budget: int | None = None  # expand_many: total neighbors; first seed claims
    at: AsOf | None = None  # an as-of read over the link versions; None: the graph, now


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
    valid_from: datetime | None = None
    valid_to: datetime | None = None


@dataclass(frozen=True)
class EntityMatch:
    """An entity found by name (`find_objects` with `include_entities`): how it matched
    (`exact` normalised name, `alias`, `trigram`), the alias that matched (`via`), a score in
    (0, 1] (exact 1, alias 0.95, trigram similarity scaled below those)."""

    id: uuid.UUID
    name: str
    label: str
    part_count: int
    matched: str
    score: float
    via: str | None = None
