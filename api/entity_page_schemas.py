"""Bodies of the entity pages and the curator's queue (`api/routes/entity_pages.py`): an
entity's labels and neighbours (added to `GET /v1/entities/{id}`), its mentions a page at a
time, entity search by name, and the POSSIBLY_SAME pairs with their evidence."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from api.entity_neighbour_schemas import LabelCount, NeighbourOut
from api.resolution_schemas import Label, Phrase
from pipeline.entities.resolver import Candidate
from pipeline.entities.store.pages import Mention, Pair, PairEnd

__all__ = ["LabelCount", "NeighbourOut"]

PairStatus = Literal["held", "deferred", "verified", "refused"]


class SnippetOut(BaseModel):
    text: str = Field(description="the field's text around the span, cut at word boundaries")
    start: int = Field(description="the span in `text`: [start, end)")
    end: int


class MentionOut(BaseModel):
    """A mention in a live row: `text` is `field[start:end]` of row `row_id`, a part of object
    `object_id` (or the object itself)."""

    object_id: uuid.UUID
    title: str | None
    row_id: uuid.UUID
    field: Literal["title", "summary", "content"]
    start: int
    end: int
    text: str
    snippet: SnippetOut

    @classmethod
    def of(cls, m: Mention) -> MentionOut:
        return cls(object_id=m.object_id, title=m.title, row_id=m.row_id,
                   field=m.field,
                   start=m.start, end=m.end, text=m.text,
                   snippet=SnippetOut(text=m.snippet.text, start=m.snippet.start,
                                      end=m.snippet.end))


class MentionsOut(BaseModel):
    entity_id: uuid.UUID = Field(description="the entity (the survivor, for a merged id)")
    mentions: list[MentionOut]
    cursor: str | None = Field(description="pass it back for the next page; null at the end")


class EntitySearchBody(BaseModel):
    """Find entities by name, through the resolver's layers."""

    model_config = ConfigDict(extra="forbid")

    query: Phrase
    limit: Annotated[int, Field(ge=1, le=50)] = 10
    labels: list[Label] | None = Field(default=None, min_length=1, max_length=50)


class EntitySearchHit(BaseModel):
    entity_id: uuid.UUID
    name: str
    label: str
    part_count: int
    confidence: float
    method: str = Field(description=(
        "the layer that found it: exact, alias, fold, segments, initials, nickname, prefix, "
        "spelling, embedding"))

    @classmethod
    def of(cls, c: Candidate) -> EntitySearchHit:
        return cls(entity_id=c.entity_id, name=c.name, label=c.label, part_count=c.part_count,
                   confidence=c.confidence, method=c.method)


class EntitySearchOut(BaseModel):
    query: str
    entities: list[EntitySearchHit]
    skipped: list[str] = Field(description="layers that could not run, and why")


class PairEndOut(BaseModel):
    id: uuid.UUID
    name: str
    label: str
    part_count: int
    aliases: list[str]
    contexts: list[MentionOut] = Field(description="a few of its mentions, with snippets")

    @classmethod
    def of(cls, e: PairEnd) -> PairEndOut:
        return cls(id=e.id, name=e.name, label=e.label, part_count=e.part_count,
                   aliases=e.aliases, contexts=[MentionOut.of(m) for m in e.contexts])


class SharedOut(BaseModel):
    entity_id: uuid.UUID
    name: str
    label: str
    weight: float = Field(description="the weaker of its two joins")


class PairOut(BaseModel):
    """A POSSIBLY_SAME pair and the evidence a curator decides on."""

    from_: PairEndOut = Field(serialization_alias="from")
    to: PairEndOut
    status: PairStatus
    confidence: float | None
    method: str | None = Field(description="the resolver layer that proposed it (`person`: "
                                           "a decision made before any proposal)")
    updated_at: datetime
    shared_neighbours: list[SharedOut]

    @classmethod
    def of(cls, p: Pair) -> PairOut:
        return cls(from_=PairEndOut.of(p.from_end), to=PairEndOut.of(p.to_end),
                   status=p.status,
                   confidence=p.confidence, method=p.method, updated_at=p.updated_at,
                   shared_neighbours=[SharedOut(entity_id=i, name=n, label=lb, weight=w)
                                      for i, n, lb, w in p.shared])


class PairsOut(BaseModel):
    status: PairStatus
    pairs: list[PairOut]
    cursor: str | None = Field(description="pass it back for the next page; null at the end")
