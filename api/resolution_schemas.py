"""Request and response bodies of the entity routes (`api/routes/entities.py`): resolve, read
one entity, merge, and decide a possibly-same pair."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from api.entity_neighbour_schemas import LabelCount, NeighbourOut
from api.grounding_schemas import TextEntityOut
from api.plain_text import PLAIN_TEXT
from pipeline.domain.resolution import Evidence
from pipeline.entities.merging import PairDecision
from pipeline.entities.resolver import Candidate, Resolution
from pipeline.entities.store.merges import MergeReport
from pipeline.retrieval.grounding import MAX_TEXT_CHARS

# Entity labels: what extractors write (NAME, ACRONYM, PERSON, ORG, ...).
Label = Annotated[str, StringConstraints(min_length=1, max_length=64,
                                         pattern=r"^[A-Za-z][A-Za-z0-9_]*$")]
# A phrase to resolve: a name, not a passage, non-blank; control characters refused at the
# boundary, like every text.
Phrase = Annotated[str, StringConstraints(min_length=1, max_length=500, pattern=r"\S"),
                   PLAIN_TEXT]


# A passage to ground (`text`): every entity it names is answered.
Passage = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT_CHARS,
                                           pattern=r"\S"), PLAIN_TEXT]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ResolveBody(_Strict):
    """One phrase (`query`), several (`queries`, at most 20), or a passage (`text`)."""

    query: Phrase | None = None
    queries: list[Phrase] | None = Field(default=None, min_length=1, max_length=200)
    limit: Annotated[int, Field(ge=1, le=50)] | None = None
    labels: list[Label] | None = Field(default=None, min_length=1, max_length=50)
    text: Passage | None = Field(default=None, description=(
        "a passage: the answer's `entities` lists every entity it names, with the spans "
        "naming it (longest match first, never overlapping) and the layer of each"))


class CandidateOut(BaseModel):
    entity_id: uuid.UUID
    name: str
    label: str
    confidence: float
    method: str

    @classmethod
    def of(cls, c: Candidate) -> CandidateOut:
        return cls(entity_id=c.entity_id, name=c.name, label=c.label, confidence=c.confidence,
                   method=c.method)


class ResolutionEvidenceOut(BaseModel):
    row_id: uuid.UUID
    text: str
    object_id: uuid.UUID

    @classmethod
    def of(cls, e: Evidence) -> ResolutionEvidenceOut:
        return cls(row_id=e.row_id, text=e.text, object_id=e.object_id)


class AnswerOut(BaseModel):
    """The entity a phrase names, or `unresolved: true` with a `reason`."""

    query: str
    unresolved: bool = False
    reason: Literal["no_candidates", "tie", "below_threshold"] | None = None
    entity_id: uuid.UUID | None = None
    name: str | None = None
    label: str | None = None
    confidence: float | None = None
    method: str | None = None
    candidates: list[CandidateOut]
    evidence: list[ResolutionEvidenceOut] = []
    skipped: list[str] = []  # layers that could not run, and why

    @classmethod
    def of(cls, r: Resolution) -> AnswerOut:
        candidates = [CandidateOut.of(c) for c in r.candidates]
        if r.entity is None:
            return cls(query=r.query, unresolved=True, reason=r.reason,
                       candidates=candidates, skipped=r.skipped)
        e = r.entity
        return cls(query=r.query, entity_id=e.entity_id, name=e.name, label=e.label,
                   confidence=e.confidence, method=e.method, candidates=candidates,
                   evidence=[ResolutionEvidenceOut.of(x) for x in r.evidence], skipped=r.skipped)


class ResolveOut(BaseModel):
    results: list[AnswerOut]
    # `text` only: the entities the passage names, in the order they are first named
    entities: list[TextEntityOut] | None = None


class AliasOut(BaseModel):
    alias: str
    source: str


class EntityOut(BaseModel):
    """An entity; when the one asked for was merged, the survivor with a note."""

    id: uuid.UUID
    name: str
    label: str
    part_count: int
    created_at: datetime
    updated_at: datetime
    aliases: list[AliasOut]
    counts: dict[str, Any]
    merged_from: uuid.UUID | None = None
    note: str | None = None
    labels: list[LabelCount] = Field(default=[], description=(
        "the labels its mentions in live rows carry, with counts, most first"))
    mention_count: int = Field(default=0, description="its mentions in live rows")
    object_count: int = Field(default=0, description=(
        "the live first-class objects that name it (in their own fields or their parts)"))
    neighbours: list[NeighbourOut] = Field(default=[], description=(
        "the 10 strongest edges to other live entities: CO_OCCURS, RELATES (with its "
        "predicate), POSSIBLY_SAME verified by a person"))


class MergeBody(_Strict):
    from_: uuid.UUID = Field(alias="from")
    into: uuid.UUID
    dry_run: bool = False


class MergeOut(BaseModel):
    from_: uuid.UUID = Field(serialization_alias="from")
    into: uuid.UUID
    dry_run: bool
    mentions: int
    aliases: int
    edges_moved: int
    edges_dropped: int
    objects: list[uuid.UUID]
    merge_id: int | None
    part_count: int | None

    @classmethod
    def of(cls, r: MergeReport) -> MergeOut:
        return cls(from_=r.from_id, into=r.into_id, dry_run=r.dry_run, mentions=r.mentions,
                   aliases=r.aliases, edges_moved=r.edges_moved, edges_dropped=r.edges_dropped,
                   objects=r.objects, merge_id=r.merge_id, part_count=r.part_count)


class DecisionBody(_Strict):
    decision: Literal["verify", "refuse", "defer"]


class DecisionOut(BaseModel):
    from_: uuid.UUID = Field(serialization_alias="from")
    to: uuid.UUID
    status: str
    merge: MergeOut | None

    @classmethod
    def of(cls, d: PairDecision) -> DecisionOut:
        return cls(from_=d.from_id, to=d.to_id, status=d.status,
                   merge=MergeOut.of(d.merge) if d.merge else None)
