"""The values PPR retrieval reads from the entity layer (plain data, no I/O).

The store that answers them is `pipeline.ports.EntityGraph`; every value is of one namespace.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class EntityRef:
    """A live (not merged away) entity: its id, display name and how many live rows name it."""

    id: uuid.UUID
    name: str
    part_count: int


@dataclass(frozen=True)
class NameMatch:
    """An entity a looked-up key names, and the layer that matched: `exact` (normalised name),
    `alias` (the alias table) or `fold` (accents and punctuation ignored)."""

    key: str
    method: str
    entity: EntityRef


@dataclass(frozen=True)
class RowMention:
    """A live row naming an entity: the row, its promoted object (a part's parent, or the row
    itself), whether it is a part, and the entity with its row count (the hub rule reads it)."""

    row_id: uuid.UUID
    object_id: uuid.UUID
    is_part: bool
    entity_id: uuid.UUID
    entity_part_count: int


@dataclass(frozen=True)
class EntityLink:
    """An entity-to-entity edge the walk may follow (RELATES, or POSSIBLY_SAME not refused),
    with both ends' row counts."""

    from_id: uuid.UUID
    to_id: uuid.UUID
    edge_type: str
    status: str | None
    from_part_count: int
    to_part_count: int


@dataclass(frozen=True)
class Hop:
    """One hop of the PPR walk, read at once: the live rows naming the hop's entities (at most
    a cap each), the live entities naming the hop's rows, and the walkable edges touching the
    hop's entities (at most a limit)."""

    rows_of: list[RowMention]
    entities_of: list[RowMention]
    links: list[EntityLink]
