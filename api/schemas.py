"""Request and response bodies of the read API (strict: unknown fields are refused)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from api.plain_text import PLAIN_TEXT
from pipeline.domain.mentions import ObjectEntity
from pipeline.domain.read_model import Filters, Page, RichObject, SearchMode
from pipeline.domain.relations import RELATION_TYPE_PATTERN
from pipeline.retrieval.paging import RESULT_SET_ID_PATTERN

# Text refuses NUL and control characters at the boundary (422, api/plain_text.py), never a
# 500 further in; a query must also hold a non-blank character.
Text = Annotated[str, StringConstraints(max_length=2000), PLAIN_TEXT]
Query = Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"\S"), PLAIN_TEXT]
Number = Annotated[float, Field(allow_inf_nan=False)]
Limit = Annotated[int, Field(ge=1, le=100)]
RelationType = Annotated[str, StringConstraints(pattern=RELATION_TYPE_PATTERN)]
ScalarValue = Text | int | Number | bool


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
        kinds = (self.kind,) if isinstance(self.kind, str) else tuple(self.kind or ())
        props: list[tuple[str, tuple[ScalarValue, ...]]] = []
        for name, value in sorted((self.model_extra or {}).items()):
            values = tuple(value) if isinstance(value, list) else (value,)
            props.append((name, values))
        return Filters(kinds=kinds, title=self.title, created_after=self.created_after,
                       created_before=self.created_before, updated_after=self.updated_after,
                       updated_before=self.updated_before, properties=tuple(props))


class FindExactBody(_Strict):
    query: Query
    filters: FiltersBody | None = None
    limit: Limit = 10
    scope_ids: list[uuid.UUID] | None = Field(default=None, max_length=1000)


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
        " truncated, and per returned object its first-stage rank, PPR rank and fused score"))
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


class FindObjectsBody(_Strict):
    query: Query
    kinds: list[Text] | None = Field(default=None, max_length=50)
    filters: FiltersBody | None = None
    limit: Limit = 10
    include_entities: bool = Field(default=False, description=(
        "also answer the extracted entities named like the query (`entities`), at most "
        "`limit`; kinds and filters do not apply to them"))


class FindLinksBody(_Strict):
    relation_type: RelationType
    query: Query
    limit: Limit = 10


class ExpandBody(_Strict):
    object_id: uuid.UUID
    relation_types: list[RelationType] | None = Field(default=None, max_length=50)
    max_hops: Annotated[int, Field(ge=1, le=4)] = 1
    direction: Literal["out", "in", "both"] = "both"
    limit: Limit = 20
    want_containment: bool = True


class ExpandManyBody(_Strict):
    object_ids: list[uuid.UUID] = Field(min_length=1, max_length=100)
    relation_types: list[RelationType] | None = Field(default=None, max_length=50)
    max_hops: Annotated[int, Field(ge=1, le=4)] = 1
    direction: Literal["out", "in", "both"] = "both"
    neighbor_budget: Annotated[int, Field(ge=1, le=500)] = 50
    limit: Limit = 20
    want_containment: bool = False


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
                                  score=e.score, position=e.position, properties=e.properties)
                      for e in obj.evidence],
            relation=None if obj.relation is None else RelationOut(
                type=obj.relation.type, direction=obj.relation.direction,
                depth=obj.relation.depth, source_id=obj.relation.source_id,
                note=obj.relation.note, status=obj.relation.status, role=obj.relation.role,
                confidence=obj.relation.confidence, evidence_id=obj.relation.evidence_id),
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

    @classmethod
    def of(cls, page: Page) -> PageOut:
        return cls(objects=[RichObjectOut.of(o) for o in page.objects],
                   result_set_id=page.result_set_id, has_more=page.has_more,
                   degrade=page.degrade, mode=page.mode, truncated=page.truncated,
                   explain=page.explain)


class ChildrenOut(BaseModel):
    objects: list[RichObjectOut]


class ErrorDetail(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorOut(BaseModel):
    error: ErrorDetail
