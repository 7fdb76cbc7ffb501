"""The projection's ports: the graph writer the outbox relay writes through, and the sink
of change events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pipeline.domain.projection import Change, EdgeKey, EdgeState, NodeState


class ChangeSink(Protocol):
    """Where change events go (the changes topic)."""

    def publish(self, changes: Sequence[Change]) -> None: ...


class GraphWriter(Protocol):
    """Write side of the graph projection. Every method is idempotent, so a relay may retry it.

    Implementations raise `pipeline.domain.errors.Unavailable` when the graph cannot be reached (the
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

    def node_times(self, ids: Sequence[str]) -> dict[str, str]:
        """The stored `updated_at` of those of `ids` with a node written from its object (a
        placeholder an edge created does not count)."""
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
