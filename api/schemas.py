"""Request and response bodies of the read API (strict: unknown fields are refused)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints

from api.asof_schemas import AsOfTime, KnownAtTime
from api.plain_text import PLAIN_TEXT, PlainJson
from pipeline.domain.match_set import DEFAULT_FACET_SIZE, MAX_FACET_SIZE, MAX_FACETS
from pipeline.domain.mentions import ObjectEntity
from pipeline.domain.read_model import (
    FacetSpec,
    Filters,
    FusionParams,
    Page,
    RichObject,
    SearchMode,
    SortSpec,
)
from pipeline.domain.relations import RELATION_TYPE_PATTERN
from pipeline.retrieval.paging import RESULT_SET_ID_PATTERN
from pipeline.retrieval.tuning import (
    MAX_DAMPING,
    MAX_PASSAGE_SEED_WEIGHT,
    MAX_RRF_K,
    MAX_WEIGHT,
    MIN_DAMPING,
    MIN_RRF_K,
)

# Text refuses NUL and control characters at the boundary (422, api/plain_text.py), never a
# 500 further in; a query must also hold a non-blank character.
Text = Annotated[str, StringConstraints(max_length=2000), PLAIN_TEXT]
Query = Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"\S"), PLAIN_TEXT]
Number = Annotated[float, Field(allow_inf_nan=False)]
Limit = Annotated[int, Field(ge=1, le=100)]
RelationType = Annotated[str, StringConstraints(pattern=RELATION_TYPE_PATTERN)]
ScalarValue = Text | int | Number | bool


WHERE_DESCRIPTION = (
    "conditions on the properties of the promoted object (a part is judged by its parent),"
    " applied inside every channel: leaves {\"jsonpath\": \"$.price\", \"gte\": 10} with one"
    " of eq, ne, gt, gte, lt, lte, in (a list), exists (true/false); combined by"
    " {\"and\": [...]}, {\"or\": [...]}, {\"not\": {...}}; at most 4 deep and 20 leaves."
    " Numbers compare as numbers, ISO-8601 date-times as instants (date-only is midnight UTC),"
    " strings by code point; a list matches when one element does")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FiltersBody(BaseModel):
    """`{kind?, title?, created_after?, ..., <property>: value | [values]}`."""

    model_config = ConfigDict(extra="allow")
    # property filters: a scalar (eq) or a non-empty list of scalars (in)
    __pydantic_extra__: dict[str, ScalarValue | Annotated[list[ScalarValue],
                                                          Field(min_length=1, max_length=100)]]

    kind: Text | Annotated[list[Text], Field(max_length=100)] | None = None
    title: Text | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None

    def to_filters(self) -> Filters:
        return Filters.of_body(self.kind, self.title, self.created_after, self.created_before,
                               self.updated_after, self.updated_before, self.model_extra)


class PprFusionBody(_Strict):
    """PPR's knobs for one search (modes ppr and auto); each defaults to the wired value."""

    damping: Annotated[float, Field(ge=MIN_DAMPING, le=MAX_DAMPING)] | None = Field(
        default=None, description="the walk's damping (wired 0.5): higher walks further from "
                                  "the seeds")
    list_weight: Annotated[float, Field(ge=0, le=MAX_WEIGHT)] | None = Field(
        default=None, description="the PPR list's vote against the hybrid list's 1 (wired 0.8)")
    passage_seed_weight: Annotated[float, Field(ge=0, le=MAX_PASSAGE_SEED_WEIGHT)] | None = (
        Field(default=None, description="the hybrid list's best rows as weak seeds, their "
                                        "weight against the named entities' 1 (wired 0.05)"))
    rrf_k: Annotated[int, Field(ge=MIN_RRF_K, le=MAX_RRF_K)] | None = Field(
        default=None, description="RRF's k between the hybrid and PPR lists (wired 5)")


class FusionBody(_Strict):
    """A search's own fusion: channel weights, RRF's k, PPR's knobs (wired values when left
    out; explain shows the values used)."""

    weights: dict[Annotated[str, StringConstraints(max_length=40)],
                  Annotated[float, Field(ge=0, le=MAX_WEIGHT)]] | None = Field(
        default=None, max_length=10, description="channel name -> its vote in RRF, 0..10 (0: "
        "the channel is not asked); unknown channels are refused. Wired: lexical 1.25, "
        "trigram/fuzzy 0.5, dense 1")
    rrf_k: Annotated[int, Field(ge=MIN_RRF_K, le=MAX_RRF_K)] | None = Field(
        default=None, description="RRF's k over the channels (wired 10): smaller lets one "
                                  "channel's top ranks weigh more")
    ppr: PprFusionBody | None = None

    def to_params(self) -> FusionParams:
        ppr = self.ppr or PprFusionBody()
        return FusionParams(weights=tuple(sorted((self.weights or {}).items())),
                            rrf_k=self.rrf_k, ppr_damping=ppr.damping,
                            ppr_list_weight=ppr.list_weight,
                            ppr_passage_seed_weight=ppr.passage_seed_weight,
                            ppr_rrf_k=ppr.rrf_k)
class FacetBody(_Strict):
    """`{"field": "kind" | "created_at" | "updated_at" | "$.<property>", "size"?, "interval"?}`."""

    field: Text = Field(description=(
        "kind, created_at, updated_at, or a property as $.<name> (declared by a kind of the"
        " catalog, when there is one)"))
    size: int = Field(default=DEFAULT_FACET_SIZE, description=(
        f"how many values or buckets to return (1..{MAX_FACET_SIZE}); the rest are summed in"
        " `other`"))
    interval: Number | Text | None = Field(default=None, description=(
        "bucket the values: a number (numeric properties) or day|week|month|year (dates,"
        " UTC); without it, the most frequent values"))

    def to_spec(self) -> FacetSpec:
        return FacetSpec(self.field, self.size, self.interval)  # type: ignore[arg-type]


class SortBody(_Strict):
    """`{"field": ..., "order": "asc" | "desc"}`."""

    field: Text = Field(default="relevance", description=(
        "relevance (default), updated_at, created_at, title (case-insensitive), position, or"
        " a property as $.<name> (numbers as numbers, datetimes as instants; a list sorts by"
        " its first element; objects without it last in both orders)"))
    order: Literal["asc", "desc"] | None = Field(default=None, description=(
        "default: desc for relevance and the times, asc otherwise"))

    def to_spec(self) -> SortSpec:
        return SortSpec(self.field, self.order)


class FindExactBody(_Strict):
    query: Query
    filters: FiltersBody | None = None
    limit: Limit = 10
    scope_ids: list[uuid.UUID] | None = Field(default=None, max_length=1000)
    strict: bool = Field(default=False, description=(
        "refuse with 503 `degraded_answer` instead of answering degraded (`lexical_only`: the"
        " query embedder is down; `rerank_skipped`: the reranker was slow or down)"))
    facets: list[FacetBody] | None = Field(default=None, max_length=MAX_FACETS, description=(
        "counts per value of each field over the match set (every object passing the filters"
        " that holds a query word, and every ranked hit), objects not parts; first page"
        " only, as `facets` beside the hits"))
    sort: SortBody | None = Field(default=None, description=(
        "order the match set's first 1,000 objects by a field instead of relevance (ties by"
        " relevance, then id); `continue` pages through that order"))
    where: PlainJson | None = Field(default=None, description=WHERE_DESCRIPTION)


class VectorBody(_Strict):
    """A vector computed by the caller with the index generation's model."""

    model: Text = Field(description=(
        "the model that computed it: the generation's embedder (`minilm` or"
        " `sentence-transformers/all-MiniLM-L6-v2`, `static`, or an `http` embedder's model"
        " name); another is refused (422, `vector.model`)"))
    values: list[Number] = Field(min_length=1, max_length=16000, description=(
        "the vector, of the model's dimension (422, `vector.values`, otherwise)"))


class SearchBody(FindExactBody):
    query: Query | None = Field(default=None, description=(  # type: ignore[assignment]
        "the query text; optional with `similar_to` (which takes none) or `vector`"))
    mode: SearchMode = Field(default="hybrid", description=(
        "hybrid: lexical + trigram + dense, RRF. ppr: that list fused with Personalized"
        " PageRank over the entities the query names (multi-hop questions). auto: ppr when"
        " the query names at least one usable entity, else hybrid; the answer's `mode` says"
        " which ran"))
    explain: bool = Field(default=False, description=(
        "add an `explain` block: seeds and weights, hubs dropped, subgraph size, iterations,"
        " truncated, the fusion used, and per returned object its first-stage rank, PPR rank,"
        " fused score, each channel's rank and raw score, PPR score and reranker score"))
    rerank: bool | None = Field(default=None, description=(
        "re-order the fused best objects with the configured reranker (default: on when one"
        " is configured; true without one is a 422). When it is slow or down the fused order"
        " is answered, labelled `degrade: rerank_skipped`"))
    fusion: FusionBody | None = Field(default=None, description=(
        "this search's own fusion knobs (channel weights, RRF k, PPR damping and weights);"
        " left out: the wired values"))
    similar_to: uuid.UUID | None = Field(default=None, description=(
        "more like this object (or part): its own vector on the dense channel and its most"
        " distinctive words on the lexical one; it and its parts are left out. No `query`;"
        " 404 when it is not visible to the caller"))
    min_score: Annotated[float, Field(ge=-1.0, le=1.0)] | None = Field(
        default=None, description=(
            "a floor on the dense channel's cosine similarity: a range search, every row"
            " within it (up to 1,000 objects, paged by `continue`; `truncated` past that), and"
            " only objects with such a row answer (e.g. `similar_to` with 0.95: near-duplicates)"))
    vector: VectorBody | None = Field(default=None, description=(
        "the dense channel's query vector, computed by the caller with the generation's model;"
        " with `query` the other channels search its text, without it the dense channel"
        " answers alone. Not with `similar_to`"))
    as_of: AwareDatetime | None = Field(default=None, description=(
        "modes ppr / auto: walk the RELATES facts holding at this world time (RFC 3339 with"
        " an offset; default now)"))
    known_at: AwareDatetime | None = Field(default=None, description=(
        "modes ppr / auto: walk the RELATES facts as the system knew them at this time"
        " (default now)"))
    from_messages: list[uuid.UUID] | None = Field(
        default=None, min_length=1, max_length=50, description=(
            "conversation messages (their uuids) to walk from: the entities they name join"
            " the query's PPR seeds, so the answer reaches the documents about the people and"
            " things the conversation names (mode hybrid runs as ppr). A hidden, unknown or"
            " other namespace's message adds nothing. Not with `similar_to` or `vector`"))


class FindObjectsBody(_Strict):
    query: Query
    kinds: list[Text] | None = Field(default=None, max_length=50)
    filters: FiltersBody | None = None
    limit: Limit = 10
    include_entities: bool = Field(default=False, description=(
        "also answer the extracted entities named like the query (`entities`), at most "
        "`limit`; kinds and filters do not apply to them"))
    where: PlainJson | None = Field(default=None, description=WHERE_DESCRIPTION)


class FindLinksBody(_Strict):
    relation_type: RelationType
    query: Query
    limit: Limit = 10
    as_of: AsOfTime = None
    known_at: KnownAtTime = None


class ExpandBody(_Strict):
    object_id: uuid.UUID
    relation_types: list[RelationType] | None = Field(default=None, max_length=50)
    max_hops: Annotated[int, Field(ge=1, le=4)] = 1
    direction: Literal["out", "in", "both"] = "both"
    limit: Limit = 20
    want_containment: bool = True
    as_of: AsOfTime = None
    known_at: KnownAtTime = None


class ExpandManyBody(_Strict):
    object_ids: list[uuid.UUID] = Field(min_length=1, max_length=100)
    relation_types: list[RelationType] | None = Field(default=None, max_length=50)
    max_hops: Annotated[int, Field(ge=1, le=4)] = 1
    direction: Literal["out", "in", "both"] = "both"
    neighbor_budget: Annotated[int, Field(ge=1, le=500)] = 50
    limit: Limit = 20
    want_containment: bool = False
    as_of: AsOfTime = None
    known_at: KnownAtTime = None


class RecipeBody(_Strict):
    """A named expand template: the expand fields without the objects."""

    relation_types: list[RelationType] | None = Field(default=None, max_length=50)
    max_hops: Annotated[int, Field(ge=1, le=4)] = 1
    direction: Literal["out", "in", "both"] = "both"
    limit: Limit = 20
    want_containment: bool = True
    neighbor_budget: Annotated[int, Field(ge=1, le=500)] | None = None


class RecipeOut(BaseModel):
    """A recipe as the caller's namespace sees it: its own (`namespace`), or an operator
    default (`default`: read-only; a recipe of the same name registered by the namespace
    shadows it for this namespace only)."""

    name: str
    source: Literal["namespace", "default"]
    spec: RecipeBody


class RecipeListOut(BaseModel):
    recipes: list[RecipeOut]


class RecipeRunBody(_Strict):
    object_ids: list[uuid.UUID] = Field(min_length=1, max_length=100)
    limit: Limit | None = None
    as_of: AsOfTime = None
    known_at: KnownAtTime = None


class ContinueBody(_Strict):
    result_set_id: Annotated[str, StringConstraints(max_length=80,
                                                    pattern=RESULT_SET_ID_PATTERN)]
    limit: Limit = 10


class EvidenceOut(BaseModel):
    part_id: uuid.UUID
    title: str | None
    snippet: str
    score: float
    position: int | None
    properties: dict[str, Any]
    highlights: list[tuple[int, int]] = Field(default_factory=list, description=(
        "[start, end) character offsets into `snippet` of the query's words, in order"))


class RelationOut(BaseModel):
    type: str
    direction: Literal["out", "in"] | None
    depth: int
    source_id: uuid.UUID | None = None
    note: str | None = None
    status: str | None = None
    role: str | None = None
    confidence: float | None = None
    evidence_id: uuid.UUID | None = None
    valid_from: datetime | None = Field(default=None, description=(
        "an as-of read (`as_of` / `known_at`): when the link's version began to hold in the"
        " world (null: always)"))
    valid_to: datetime | None = Field(default=None, description=(
        "an as-of read: when it stopped holding (null: it still holds)"))


class RichObjectOut(BaseModel):
    id: uuid.UUID
    kind: str
    title: str | None
    summary: str | None
    score: float
    properties: dict[str, Any]
    content_type: str | None
    parent_id: uuid.UUID | None
    position: int | None
    evidence: list[EvidenceOut]
    relation: RelationOut | None
    created_at: datetime
    updated_at: datetime
    content: str | None = None

    @classmethod
    def of(cls, obj: RichObject, *, with_content: bool = False) -> RichObjectOut:
        return cls(
            id=obj.id, kind=obj.kind, title=obj.title, summary=obj.summary, score=obj.score,
            properties=obj.properties, content_type=obj.content_type, parent_id=obj.parent_id,
            position=obj.position,
            evidence=[EvidenceOut(part_id=e.part_id, title=e.title, snippet=e.snippet,
                                  score=e.score, position=e.position, properties=e.properties,
                                  highlights=list(e.highlights))
                      for e in obj.evidence],
            relation=None if obj.relation is None else RelationOut(
                type=obj.relation.type, direction=obj.relation.direction,
                depth=obj.relation.depth, source_id=obj.relation.source_id,
                note=obj.relation.note, status=obj.relation.status, role=obj.relation.role,
                confidence=obj.relation.confidence, evidence_id=obj.relation.evidence_id,
                valid_from=obj.relation.valid_from, valid_to=obj.relation.valid_to),
            created_at=obj.created_at, updated_at=obj.updated_at,
            content=obj.content if with_content else None)


class MentionOut(BaseModel):
    """A span of one row of the object (the object itself or one of its parts) naming the
    entity: `text` is `field[start:end]` of that row."""

    row_id: uuid.UUID
    field: Literal["title", "summary", "content"]
    start: int
    end: int
    text: str


class ObjectEntityOut(BaseModel):
    """An entity the object names (extracted from its text), with its first mentions in
    reading order; `mention_count` counts them all."""

    entity_id: uuid.UUID
    name: str
    label: str
    mention_count: int
    mentions: list[MentionOut]

    @classmethod
    def of(cls, found: ObjectEntity) -> ObjectEntityOut:
        return cls(entity_id=found.entity_id, name=found.name, label=found.label,
                   mention_count=found.mention_count,
                   mentions=[MentionOut(row_id=m.row_id, field=m.field,
                                        start=m.start, end=m.end, text=m.text)
                             for m in found.mentions])


class ObjectOut(RichObjectOut):
    """One object with its content and the entities it names (`GET /v1/objects/{id}`)."""

    entities: list[ObjectEntityOut] = Field(default_factory=list, description=(
        "The entities the object and its parts name, the most mentioned first; empty until "
        "the extraction stage has run on the object (`brainstream status`)."))
    entities_truncated: bool = Field(default=False, description=(
        "More entities than OBJECT_ENTITIES_MAX: the least mentioned were left out."))


class PageOut(BaseModel):
    objects: list[RichObjectOut]
    result_set_id: str | None
    has_more: bool
    degrade: str | None = None
    mode: str | None = None
    truncated: bool = Field(default=False, description=(
        "a bound cut the answer: more matches may exist than these pages hold. For a result"
        " set: 1,000 items, or expansion's neighbour bound; for find_objects: filters"
        " left the page short and the search stopped at its candidate bound"
        " (1,000 per channel) before the graph ran out of"
        " candidates. Narrow the request to reach them; false when nothing was cut"))
    explain: dict[str, Any] | None = Field(default=None, description=(
        "search with `explain: true`, first page only: how the answer was ranked"))
    facets: dict[str, Any] | None = Field(default=None, description=(
        "search or find_exact with `facets`, first page only: per field asked,"
        " {\"buckets\": [{\"value\", \"count\"} | {\"from\", \"to\", \"count\"}],"
        " \"other\": the summed counts beyond `size`}; counts are objects"))

    @classmethod
    def of(cls, page: Page) -> PageOut:
        return cls(objects=[RichObjectOut.of(o) for o in page.objects],
                   result_set_id=page.result_set_id, has_more=page.has_more,
                   degrade=page.degrade, mode=page.mode, truncated=page.truncated,
                   explain=page.explain, facets=page.facets)


class ChildrenOut(BaseModel):
    objects: list[RichObjectOut]


class ErrorDetail(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorOut(BaseModel):
    error: ErrorDetail
