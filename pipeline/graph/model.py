"""What the graph projection holds, and the port through which the pipeline writes it.

The states are plain, backend-neutral values: the outbox relay builds them from Postgres rows and a
`GraphWriter` adapter (FalkorDB: `pipeline.graph.falkordb`) applies them idempotently.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pipeline.errors import InvalidInput

# Relation types end up inside query text (graph databases take no type parameters), so only
# plain identifiers are ever accepted.
RELATION_TYPE_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,62}$")


def check_relation_type(relation_type: str) -> str:
    """Return `relation_type` if it is a plain identifier, else raise InvalidInput."""
    if not isinstance(relation_type, str) or not RELATION_TYPE_PATTERN.fullmatch(relation_type):
        raise InvalidInput(
            f"relation type {relation_type!r} must match {RELATION_TYPE_PATTERN.pattern}",
            field="relation_type",
        )
    return relation_type


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


class GraphWriter(Protocol):
    """Write side of the graph projection. Every method is idempotent, so a relay may retry it.

    Implementations raise `pipeline.errors.Unavailable` when the graph cannot be reached (the
    caller retries later) and `InvalidInput` for values that can never be written.
    """

    def upsert_nodes(self, nodes: Sequence[NodeState]) -> None:
        """Create or update nodes, keeping their incident edges."""
        ...

    def delete_nodes(self, ids: Sequence[str]) -> None:
        """Remove nodes and their incident edges; missing ids are ignored."""
        ...

    def upsert_edges(self, edges: Sequence[EdgeState]) -> None:
        """Create or update edges; missing endpoints are created as placeholders."""
        ...

    def delete_edges(self, keys: Sequence[EdgeKey]) -> None:
        """Remove edges; missing edges are ignored."""
        ...

    def node_exists(self, id: str) -> bool:
        """Whether a node (placeholder included) with this id is in the graph."""
        ...

    def fetch_node(self, id: str) -> NodeState | None:
        """The stored state of one node, or None."""
        ...

    def fetch_edges(self, namespace: str | None = None) -> list[EdgeState]:
        """Every edge (of one namespace, if given)."""
        ...

    def node_ids(self, namespace: str | None = None) -> set[str]:
        """The ids of every node (of one namespace, if given)."""
        ...
