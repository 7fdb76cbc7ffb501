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


# -- the entity layer -------------------------------------------------------------------------
# Extracted entities are nodes of their own label (`NamedEntity`), never `Entity` object nodes:
# every reader of objects and links matches `Entity` only, so the entity layer is invisible to
# them. Entity edges join two NamedEntity nodes; MENTIONS joins an object node to one.

# The entity edge types (migrations/0012_entities.sql) and the properties each carries.
ENTITY_EDGE_FIELDS: dict[str, tuple[str, ...]] = {
    "CO_OCCURS": ("weight", "evidence"),
    "RELATES": ("predicate", "evidence"),
    "POSSIBLY_SAME": ("status", "confidence", "method"),
}


@dataclass(frozen=True, slots=True)
class NamedEntityState:
    """An extracted entity as projected: live (not merged away) and mentioned by a live row."""

    id: str
    namespace: str
    name: str
    norm: str
    label: str
    part_count: int


@dataclass(frozen=True, slots=True)
class MentionsState:
    """The `MENTIONS` edge from a root object to an entity its live rows name.

    `count` is the number of spans naming it, `parts` the ids of the rows holding them (the
    first few by id: capped), `updated_at` the latest update of those rows.
    """

    root_id: str
    entity_id: str
    namespace: str
    count: int
    parts: tuple[str, ...]
    updated_at: str


@dataclass(frozen=True, slots=True, order=True)
class EntityEdgeKey:
    """Identity of an entity edge: one per (from, type, predicate, to); predicate '' unless
    RELATES."""

    from_id: str
    edge_type: str
    predicate: str
    to_id: str


@dataclass(frozen=True, slots=True)
class EntityEdgeState:
    """An entity-to-entity edge with the properties of its type.

    CO_OCCURS carries `weight`, RELATES `predicate`, both `evidence` (row ids, capped);
    POSSIBLY_SAME carries `status`, `confidence` and `method`. The other fields are None.
    """

    key: EntityEdgeKey
    namespace: str
    weight: float | None
    status: str | None
    confidence: float | None
    method: str | None
    evidence: tuple[str, ...] | None
