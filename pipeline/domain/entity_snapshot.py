"""What an in-memory snapshot of a namespace's entity layer is built and refreshed from
(`pipeline/retrieval/ppr/snapshot.py` holds it; `EntitySnapshotSource` reads it): the full
build, the change log's entries, and the current state of the keys a batch of entries named.

Positions are transaction ids (Postgres `xid8` as int): a read taken in a snapshot whose oldest
running transaction was `xmin` has seen everything written by transactions below it; log
entries it did not see have `xid >= xmin`, whatever their commit order.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

# The change log's kinds (migration 0029): mentions of rows, deleted state of objects, entity
# counts / merges, walkable edges, and a truncated table (every snapshot is rebuilt).
ROW, OBJECT, ENTITY, EDGE, TRUNCATE = "row", "object", "entity", "edge", "truncate"


@dataclass(frozen=True)
class SnapshotLink:
    """A walkable entity edge (RELATES, or POSSIBLY_SAME not refused); the predicate tells
    apart two RELATES edges of one pair."""

    from_id: uuid.UUID
    to_id: uuid.UUID
    edge_type: str
    status: str | None
    predicate: str


@dataclass(frozen=True)
class SnapshotRow:
    """A row (object or part) of the namespace: its promoted object, whether it is a part, and
    whether it is live (it and its promoted object not deleted)."""

    row_id: uuid.UUID
    object_id: uuid.UUID
    is_part: bool
    live: bool


@dataclass
class SnapshotBuild:
    """A namespace's entity layer read at once (one transaction): entities and rows sorted by
    id, the distinct (row, entity) mention pairs as indices into them, the walkable edges, and
    the read's `xmin`; for the seed lookup, each entity's name and normalised name (in entity
    order) and the alias table as (alias norm, entity id) pairs."""

    xmin: int
    entity_ids: list[uuid.UUID]
    entity_counts: npt.NDArray[np.int64]
    entity_live: npt.NDArray[np.bool_]
    rows: list[SnapshotRow]
    mention_rows: npt.NDArray[np.int64]
    mention_entities: npt.NDArray[np.int64]
    links: list[SnapshotLink]
    entity_names: list[str] = field(default_factory=list)
    entity_norms: list[str] = field(default_factory=list)
    aliases: list[tuple[str, uuid.UUID]] = field(default_factory=list)


@dataclass(frozen=True)
class LogEntry:
    """One change log row: what a committed statement touched in a namespace."""

    seq: int
    xid: int
    namespace_id: uuid.UUID
    kind: str
    ids: tuple[uuid.UUID, ...]


@dataclass(frozen=True)
class LogRead:
    """The log entries with `xid >= since` a read saw, and that read's `xmin` (the next read's
    `since`)."""

    entries: list[LogEntry]
    xmin: int


@dataclass(frozen=True)
class EntityState:
    """An entity as it is now: its live rows count (`part_count`) and whether it is live (not
    merged away). An entity that no longer exists is not live. For the seed lookup: its name,
    normalised name and alias norms (None: not read, keep what is held)."""

    id: uuid.UUID
    part_count: int
    live: bool
    name: str = ""
    norm: str = ""
    aliases: tuple[str, ...] | None = None


@dataclass
class KeyState:
    """The current state, read in one transaction, of the keys some log entries named: rows
    (those asked, and the parts of objects asked) with their liveness, each asked row's
    mentioned entities, the entities involved, and every walkable edge touching each asked
    entity. Asked keys absent from the answer no longer exist."""

    asked_rows: set[uuid.UUID] = field(default_factory=set)
    rows: list[SnapshotRow] = field(default_factory=list)
    mentions: dict[uuid.UUID, tuple[uuid.UUID, ...]] = field(default_factory=dict)
    entities: list[EntityState] = field(default_factory=list)
    links: dict[uuid.UUID, list[SnapshotLink]] = field(default_factory=dict)
