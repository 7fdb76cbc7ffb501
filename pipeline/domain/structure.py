"""Caller-supplied structure of an object put: the checks its `entities` and `relations` must
pass, and how they fall on the rows the put writes.

A content span refers to the whole content; when the content is cut into parts, it falls on the
part(s) holding it whole (two where chunks overlap), else it is clipped to each part it crosses.
Title and summary spans fall on the object itself. A relation is stated by the first row its span
falls on, by the object itself without a span. Pure: the consumer stores what this computes and
the extraction stage reads it instead of calling the extractor (pipeline/entities/stage.py).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from pipeline.domain.errors import StructureInvalid


# What the rules read of the boundary's models (schemas/payloads.py: ObjectPut, StructureSpan),
# as protocols: the schemas import the domain, never the other way round.
class StructureSpan(Protocol):
    @property
    def field(self) -> str: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


class _Entity(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def label(self) -> str | None: ...
    @property
    def spans(self) -> Sequence[StructureSpan]: ...


class _Relation(Protocol):
    @property
    def subject(self) -> str: ...
    @property
    def predicate(self) -> str: ...
    @property
    def object(self) -> str: ...
    @property
    def span(self) -> StructureSpan | None: ...
    @property
    def valid_from(self) -> datetime | None: ...
    @property
    def valid_to(self) -> datetime | None: ...


class ObjectPut(Protocol):
    @property
    def parent_id(self) -> uuid.UUID | None: ...
    @property
    def entities(self) -> Sequence[_Entity] | None: ...
    @property
    def relations(self) -> Sequence[_Relation] | None: ...

# The label of a supplied entity without one: a shape label, so the entity is untyped (it joins
# the one typed entity of its name, as the heuristic extractor's names do).
UNTYPED_LABEL = "NAME"


@dataclass(frozen=True)
class SuppliedMention:
    name: str
    label: str
    field: str
    start: int
    end: int


@dataclass(frozen=True)
class SuppliedRelation:
    subject: str
    subject_label: str
    predicate: str
    object: str
    object_label: str
    valid_from: str | None  # ISO 8601, as stored
    valid_to: str | None


@dataclass(frozen=True)
class RowStructure:
    """What one row of a put is said to mention and state."""

    row_id: uuid.UUID
    mentions: list[SuppliedMention] = field(default_factory=list)
    relations: list[SuppliedRelation] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"mentions": [asdict(m) for m in self.mentions],
                "relations": [asdict(r) for r in self.relations]}

    def digest(self) -> str:
        """Changes when what the row is said to hold changes (part of its extraction hash)."""
        text = json.dumps(self.as_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:32]


def row_structure_from_json(row_id: uuid.UUID, data: dict[str, Any]) -> RowStructure:
    return RowStructure(row_id, [SuppliedMention(**m) for m in data.get("mentions", [])],
                        [SuppliedRelation(**r) for r in data.get("relations", [])])


def has_structure(put: ObjectPut) -> bool:
    """Whether the put supplies its structure (then the extractor does not read its rows)."""
    return put.entities is not None or put.relations is not None


def _check_span(put: ObjectPut, span: StructureSpan, where: str) -> None:
    text = getattr(put, span.field)
    if text is None:
        raise StructureInvalid(f"{where}: the put has no {span.field}", field=f"{where}.field")
    if put.parent_id is not None and span.field != "content":
        raise StructureInvalid(f"{where}: a part's entities are read in its content only",
                               field=f"{where}.field")
    if not span.start < span.end <= len(text):
        raise StructureInvalid(
            f"{where}: [{span.start}, {span.end}) is not a span of the {span.field}"
            f" ({len(text)} characters)", field=f"{where}.end")
    if not text[span.start:span.end].strip():
        raise StructureInvalid(f"{where}: the span is blank", field=f"{where}.start")


def check_structure(put: ObjectPut) -> None:
    """Refuse (`StructureInvalid`, naming the field) entities whose spans are not spans of the
    put's fields, two entities of one name, and relations naming no entity of the put."""
    labels: dict[str, str | None] = {}
    for i, entity in enumerate(put.entities or []):
        where = f"data.entities[{i}]"
        if not entity.name.strip():
            raise StructureInvalid(f"{where}.name: blank", field=f"{where}.name")
        if entity.name in labels:
            raise StructureInvalid(f"{where}.name: {entity.name!r} is named twice",
                                   field=f"{where}.name")
        labels[entity.name] = entity.label
        for j, span in enumerate(entity.spans):
            _check_span(put, span, f"{where}.spans[{j}]")
    for i, rel in enumerate(put.relations or []):
        where = f"data.relations[{i}]"
        for end in ("subject", "object"):
            if getattr(rel, end) not in labels:
                raise StructureInvalid(f"{where}.{end}: {getattr(rel, end)!r} is no entity of"
                                       " this put", field=f"{where}.{end}")
        if rel.subject == rel.object:
            raise StructureInvalid(f"{where}: subject and object are one entity",
                                   field=f"{where}.object")
        if not rel.predicate.strip():
            raise StructureInvalid(f"{where}.predicate: blank", field=f"{where}.predicate")
        if rel.span is not None:
            _check_span(put, rel.span, f"{where}.span")
        if (rel.valid_from is not None and rel.valid_to is not None
                and rel.valid_to <= rel.valid_from):
            raise StructureInvalid(f"{where}.valid_to: not after valid_from",
                                   field=f"{where}.valid_to")


def utc_iso(t: datetime | None) -> str | None:
    """An instant as stored in a row's structure: ISO 8601 in UTC (one text per instant)."""
    return None if t is None else t.astimezone(UTC).isoformat()


def split_structure(put: ObjectPut, root_id: uuid.UUID,
                    parts: Sequence[tuple[uuid.UUID, int, int]]) -> list[RowStructure]:
    """Each row's structure: `root_id` (the object, or the explicit part the put writes) and
    `parts`, the (id, start, end) in the content of the parts its content is cut into. Every row
    gets one (maybe empty): the put supplies the structure of all its rows."""
    rows = {root_id: RowStructure(root_id)} | {pid: RowStructure(pid) for pid, _, _ in parts}

    def place(span: StructureSpan) -> list[tuple[uuid.UUID, int, int]]:
        if span.field != "content" or not parts:
            return [(root_id, span.start, span.end)]
        whole = [(pid, span.start - s, span.end - s) for pid, s, e in parts
                 if s <= span.start and span.end <= e]
        if whole:
            return whole
        return [(pid, max(span.start, s) - s, min(span.end, e) - s) for pid, s, e in parts
                if span.start < e and s < span.end]

    labels = {e.name: e.label or UNTYPED_LABEL for e in put.entities or []}
    for entity in put.entities or []:
        for span in entity.spans:
            for row_id, start, end in place(span):
                rows[row_id].mentions.append(SuppliedMention(
                    entity.name, labels[entity.name], span.field, start, end))
    for rel in put.relations or []:
        placed = place(rel.span) if rel.span is not None else []
        row_id = placed[0][0] if placed else root_id
        rows[row_id].relations.append(SuppliedRelation(
            rel.subject, labels[rel.subject], rel.predicate, rel.object, labels[rel.object],
            utc_iso(rel.valid_from), utc_iso(rel.valid_to)))
    return list(rows.values())
