"""The answer of `POST /v1/resolve` with `text` (a passage): every entity it names, with spans."""

from __future__ import annotations

import uuid

from pydantic import BaseModel, Field

from pipeline.retrieval.grounding import Grounded, Span


class SpanOut(BaseModel):
    start: int = Field(description="first character of the span in `text`")
    end: int = Field(description="one past its last character")
    text: str = Field(description="`text[start:end]`")
    method: str = Field(description="the layer that matched: exact, alias or fold")
    confidence: float

    @classmethod
    def of(cls, s: Span) -> SpanOut:
        return cls(start=s.start, end=s.end, text=s.text, method=s.method,
                   confidence=s.confidence)


class TextEntityOut(BaseModel):
    """An entity the passage names: its best layer and confidence, and every span naming it."""

    entity_id: uuid.UUID
    name: str
    label: str
    part_count: int = Field(description="live document rows naming it")
    method: str
    confidence: float
    ambiguous: bool = Field(description="a span of it also names another entity (homonyms)")
    spans: list[SpanOut]

    @classmethod
    def of(cls, g: Grounded) -> TextEntityOut:
        return cls(entity_id=g.entity.id, name=g.entity.name, label=g.label,
                   part_count=g.entity.part_count, method=g.method, confidence=g.confidence,
                   ambiguous=g.ambiguous, spans=[SpanOut.of(s) for s in g.spans])
