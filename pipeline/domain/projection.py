"""The graph projection as values: what the relay writes and what it announces.

The states are plain, backend-neutral values: the outbox relay builds them from Postgres rows and a
`GraphWriter` (`pipeline.ports`; FalkorDB: `pipeline.graph.falkordb.writer`) applies them
idempotently. A `Change` is the event published on the changes topic once the graph agrees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class NodeState:
    """A first-class object as projected into the graph.

    `embedded_hash` identifies the text the embedding was computed from: writers compare it to
    decide whether the stored vector must be rewritten. A node created only as an edge endpoint
    (a placeholder, not yet projected itself) reads back with `kind == ""`.
    """

    id: str
    namespace: str
    kind: str
    title: str | None
    index_text: str
    embedding: tuple[float, ...] | None
    embedded_hash: str | None
    updated_at: str

    @property
    def is_placeholder(self) -> bool:
        """True for an edge endpoint whose own node projection has not arrived yet."""
        return not self.kind


@dataclass(frozen=True, slots=True)
class EdgeKey:
    """Identity of a typed, directed edge: at most one edge per (from, type, to)."""

    from_id: str
    relation_type: str
    to_id: str


@dataclass(frozen=True, slots=True)
class EdgeState:
    """A typed, directed edge with its metadata (`confidence == 0` means unset)."""

    from_id: str
    to_id: str
    relation_type: str
    namespace: str
    note: str | None
    status: str | None
    role: str | None
    confidence: float
    evidence_id: str | None
    created_at: str
    updated_at: str

    @property
    def key(self) -> EdgeKey:
        """The identity of this edge."""
        return EdgeKey(self.from_id, self.relation_type, self.to_id)


@dataclass(frozen=True)
class Change:
    """A change event: something became visible (or vanished) in the index."""

    type: str  # object.indexed | object.deleted | link.indexed | link.deleted
    namespace: str
    key: str
    data: dict[str, Any]
    id: str

