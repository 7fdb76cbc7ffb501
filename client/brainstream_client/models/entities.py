"""Entity resolution, entity reads and curators' decisions: their bodies and answers (the
API's `api/resolution_schemas.py`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import Field

from brainstream_client.models.base import Answer, Body


class ResolveBody(Body):
    """Exactly one of `query` (one phrase), `queries` (several) and `text` (a passage)."""

    query: str | None = None
    queries: list[str] | None = None
    limit: int | None = None
    labels: list[str] | None = None
    text: str | None = None


class CandidateOut(Answer):
    entity_id: UUID
    name: str
    label: str
    confidence: float
    method: str


class ResolutionEvidenceOut(Answer):
    """A passage naming a candidate (the API's `api.resolution_schemas.ResolutionEvidenceOut`)."""

    row_id: UUID
    text: str
    object_id: UUID


class AnswerOut(Answer):
    query: str
    unresolved: bool = False
    reason: Literal["no_candidates", "tie", "below_threshold"] | None = None
    entity_id: UUID | None = None
    name: str | None = None
    label: str | None = None
    confidence: float | None = None
    method: str | None = None
    candidates: list[CandidateOut]
    evidence: list[ResolutionEvidenceOut] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)


class SpanOut(Answer):
    start: int
    end: int
    text: str
    method: str
    confidence: float


class TextEntityOut(Answer):
    """An entity a passage names (`resolve(text=...)`), with every span naming it."""

    entity_id: UUID
    name: str
    label: str
    part_count: int
    method: str
    confidence: float
    ambiguous: bool
    spans: list[SpanOut]


class ResolveOut(Answer):
    results: list[AnswerOut]
    entities: list[TextEntityOut] | None = None


class AliasOut(Answer):
    alias: str
    source: str


class LabelCount(Answer):
    label: str
    count: int


class NeighbourOut(Answer):
    """An entity joined to another: CO_OCCURS, RELATES (`predicate`, `direction`) or a
    POSSIBLY_SAME pair a person verified."""

    entity_id: UUID
    name: str
    label: str
    edge_type: Literal["CO_OCCURS", "RELATES", "POSSIBLY_SAME"]
    predicate: str | None = None
    direction: Literal["out", "in"] | None = None
    weight: float


class EntityOut(Answer):
    id: UUID
    name: str
    label: str
    part_count: int
    created_at: datetime
    updated_at: datetime
    aliases: list[AliasOut]
    counts: dict[str, Any]
    merged_from: UUID | None = None
    note: str | None = None
    labels: list[LabelCount] = Field(default_factory=list)
    mention_count: int = 0
    object_count: int = 0
    neighbours: list[NeighbourOut] = Field(default_factory=list)


class MergeBody(Body):
    from_: UUID = Field(alias="from")
    into: UUID
    dry_run: bool = False


class MergeOut(Answer):
    from_: UUID = Field(alias="from")
    into: UUID
    dry_run: bool
    mentions: int
    aliases: int
    edges_moved: int
    edges_dropped: int
    objects: list[UUID]
    merge_id: int | None
    part_count: int | None


class DecisionBody(Body):
    decision: Literal["verify", "refuse", "defer"]


class DecisionOut(Answer):
    from_: UUID = Field(alias="from")
    to: UUID
    status: str
    merge: MergeOut | None


class SnippetOut(Answer):
    text: str
    start: int
    end: int


class MentionOut(Answer):
    """A mention in a live row: `text` is `field[start:end]` of row `row_id` (of object
    `object_id`), with a snippet around it."""

    object_id: UUID
    title: str | None
    row_id: UUID
    field: Literal["title", "summary", "content"]
    start: int
    end: int
    text: str
    snippet: SnippetOut


class MentionsOut(Answer):
    entity_id: UUID
    mentions: list[MentionOut]
    cursor: str | None


class EntitySearchBody(Body):
    query: str
    limit: int = 10
    labels: list[str] | None = None


class EntitySearchHit(Answer):
    entity_id: UUID
    name: str
    label: str
    part_count: int
    confidence: float
    method: str


class EntitySearchOut(Answer):
    query: str
    entities: list[EntitySearchHit]
    skipped: list[str]


PairStatus = Literal["held", "deferred", "verified", "refused"]


class PairEndOut(Answer):
    id: UUID
    name: str
    label: str
    part_count: int
    aliases: list[str]
    contexts: list[MentionOut]


class SharedOut(Answer):
    entity_id: UUID
    name: str
    label: str
    weight: float


class PairOut(Answer):
    """A POSSIBLY_SAME pair and its evidence."""

    from_: PairEndOut = Field(alias="from")
    to: PairEndOut
    status: PairStatus
    confidence: float | None
    method: str | None
    updated_at: datetime
    shared_neighbours: list[SharedOut]


class PairsOut(Answer):
    status: PairStatus
    pairs: list[PairOut]
    cursor: str | None
