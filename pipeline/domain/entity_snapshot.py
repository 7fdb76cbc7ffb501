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

# What a snapshot holds, per key, for the memory bound (`EntitySnapshot.nbytes` counts the same
# way; `SnapshotSize.nbytes` estimates it from counts before a build reads a row). Per key held
# (entities and rows): the id object, its dict entry and list slots (measured with tracemalloc at
# 100k parts: see docs/operations.md).
KEY_BYTES = 260
LINK_BYTES = 200
# Per name and per alias held for the seed lookup: the strings, their dict and set slots
# (measured with tracemalloc on 19,011 names with two aliases each: 630 + 410 bytes, plus
# the strings themselves).
NAME_BYTES = 750
ALIAS_BYTES = 470
# The arrays, per key: an entity's count (int64) and live flag, a row's part and live flags,
# promoted object number and id halves (8 + 8), each array with room to grow (2x), and the
# CSR pointer (int64) of each; a mention pair is one int64 in each CSR index array.
ENTITY_ARRAY_BYTES = 2 * (8 + 1) + 8
ROW_ARRAY_BYTES = 2 * (1 + 1 + 8 + 8 + 8) + 8
PAIR_BYTES = 2 * 8
ENTITY_BYTES = KEY_BYTES + NAME_BYTES + ENTITY_ARRAY_BYTES  # an entity and its name
ROW_BYTES = KEY_BYTES + ROW_ARRAY_BYTES

# The change log's kinds (migration 0029): mentions of rows, deleted state of objects, entity
# counts / merges, walkable edges, and a truncated table (every snapshot is rebuilt).
ROW, OBJECT, ENTITY, EDGE, TRUNCATE = "row", "object", "entity", "edge", "truncate"


@dataclass(frozen=True)
class SnapshotSize:
    """What a namespace's snapshot would hold, counted before the build reads a row: entities,
    rows, mention pairs (counted with repeats: the build drops them), walkable edges and
    aliases."""

    entities: int = 0
    rows: int = 0
    pairs: int = 0
    links: int = 0
    aliases: int = 0

    def nbytes(self) -> int:
        """The memory a snapshot of this size holds, at the per-key costs of the bound."""
        return (ENTITY_BYTES * self.entities + ROW_BYTES * self.rows + PAIR_BYTES * self.pairs
                + LINK_BYTES * self.links + ALIAS_BYTES * self.aliases)


class SnapshotTooLarge(Exception):
    """A build refused (from its estimate, before reading a row) or aborted (its stream
    crossed the cap): the snapshot would need `needed` bytes, over the `cap` it was given;
    `read` is how many tuples it had read (0: refused from the estimate)."""

    def __init__(self, needed: int, cap: int, read: int) -> None:
        super().__init__(f"needs ~{needed >> 10} KiB, over the {cap >> 10} KiB it may take"
                         f" ({read} tuples read)")
        self.needed, self.cap, self.read = needed, cap, read


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
