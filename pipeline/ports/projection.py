"""The projection's ports: the graph writer the outbox relay writes through, and the sink
of change events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pipeline.domain.projection import (
    Change,
    EdgeKey,
    EdgeState,
    EntityEdgeKey,
    EntityEdgeState,
    MentionsState,
    NamedEntityState,
    NodeState,
)


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

    def upsert_named_entities(self, entities: Sequence[NamedEntityState]) -> None:
        """Create or update entity nodes (unseen by the object reads above), keeping edges."""
        ...

    def delete_named_entities(self, ids: Sequence[str]) -> None:
        """Remove entity nodes with their MENTIONS and entity edges; missing ids are ignored."""
        ...

    def fetch_named_entities(self, ids: Sequence[str]) -> list[NamedEntityState]:
        """The stored state of those of `ids` that have an entity node."""
        ...

    def fetch_mentions(self, root_ids: Sequence[str]) -> list[MentionsState]:
        """The MENTIONS edges from these object nodes."""
        ...

    def fetch_mentions_to(self, entity_ids: Sequence[str]) -> set[str]:
        """The ids of the object nodes with MENTIONS to these entity nodes."""
        ...

    def upsert_mentions(self, mentions: Sequence[MentionsState]) -> None:
        """Create or update MENTIONS edges whose two endpoints exist (others are skipped)."""
        ...

    def delete_mentions(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Remove MENTIONS edges by (root id, entity id); missing ones are ignored."""
        ...

    def fetch_entity_edges(self, entity_ids: Sequence[str]) -> list[EntityEdgeState]:
        """The entity edges touching these entity nodes, each once."""
        ...

    def fetch_entity_edges_between(self, pairs: Sequence[tuple[str, str]]
                                   ) -> list[EntityEdgeState]:
        """The entity edges between the two entity nodes of each pair, each once."""
        ...

    def upsert_entity_edges(self, edges: Sequence[EntityEdgeState]) -> None:
        """Create or update entity edges whose two endpoints exist (others are skipped)."""
        ...

    def delete_entity_edges(self, keys: Sequence[EntityEdgeKey]) -> None:
        """Remove entity edges; missing ones are ignored."""
        ...
