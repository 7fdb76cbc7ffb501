"""The values the entity resolver trades with its store: a candidate row as the database found
it, and a mention shown as evidence (`pipeline/entities/resolver.py` decides over them,
`pipeline/entities/store/resolution.py` reads them)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class CandidateRow:
    """One live entity a lookup found, and how: through its own name (`via` "name"), one of its
    aliases ("alias", `matched` is the alias), or its name's embedding ("embedding").
    `similarity` is pg_trgm's similarity of the matched name to the phrase, or the cosine
    similarity of the embeddings."""

    entity_id: uuid.UUID
    name: str
    label: str
    part_count: int
    matched: str
    via: str
    similarity: float
    alias_source: str | None = None


@dataclass(frozen=True)
class Evidence:
    """A mention of an entity: the row that names it, the span as written, and its object."""

    row_id: uuid.UUID
    text: str
    object_id: uuid.UUID
