"""The values of the entity layer that cross ports: what an extractor reads and what it finds.

An extractor gets, per row, the text fields the row carries (`TextField`: a part's content; a
root's title, summary, and its content when it has no parts) and answers, per row, an
`Extraction`: the mentions it found (spans of those fields, `text == field_text[start:end]`) and,
when it can, relation triples between the names it found. The read side answers an object's
entities with their mentions (`ObjectEntity`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

FIELDS = ("title", "summary", "content")


@dataclass(frozen=True)
class TextField:
    """One field of one row, as the extractor reads it."""

    field: str  # one of FIELDS
    text: str


@dataclass(frozen=True)
class Mention:
    """A span of one field that names an entity.

    `name` is the entity's name as the extractor reads the span (usually the span itself, a
    quoted term without its quotes); `aliases` are other names the same span is known by (an
    identifier's segments joined: "parse_http_request" -> "parse http request"), which go to the
    alias table so a query phrased either way finds the entity.
    """

    name: str
    label: str
    field: str
    start: int
    end: int
    text: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Triple:
    """A relation an extractor read in one row: `subject -predicate-> object`, by entity name."""

    subject: str
    predicate: str
    object: str
    # a publisher's relation names its ends' labels (the entities of its put); an extractor's
    # triple names none and is looked up untyped
    subject_label: str | None = None
    object_label: str | None = None


@dataclass(frozen=True)
class Extraction:
    """What an extractor found in one row."""

    mentions: list[Mention] = field(default_factory=list)
    triples: list[Triple] = field(default_factory=list)


# -- the read side: an object's entities (GET /v1/objects/{id}) ---------------------------------


@dataclass(frozen=True)
class MentionSpan:
    """Where one row of an object names an entity."""

    row_id: uuid.UUID
    field: str
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class ObjectEntity:
    """An entity an object (its own fields or its parts) names, with the first of its mentions
    there; `mention_count` counts them all."""

    entity_id: uuid.UUID
    name: str
    label: str
    mention_count: int
    mentions: list[MentionSpan]
