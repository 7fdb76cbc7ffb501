"""`brainstream verify`, the entity layer: NamedEntity nodes, MENTIONS and entity edges in the
graph against what Postgres says they should be (`pipeline.outbox.entity_aggregates`, the same
reads the relay projects from), in full, with counts per namespace.

Repair queues `ENTITY_SYNC` for every entity whose node or edges drifted (an edge: both its
ends) and `MENTIONS_SYNC` for every root whose MENTIONS drifted; the relay re-syncs them.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pipeline.domain.projection import EntityEdgeKey, EntityEdgeState, MentionsState
from pipeline.graph.falkordb import cypher
from pipeline.graph.falkordb.writer import (
    entity_edge_state,
    mentions_state,
    named_entity_state,
)
from pipeline.ops.drift import Diff
from pipeline.outbox import store as outbox
from pipeline.outbox.entity_aggregates import load_entities, load_entity_edges, load_mentions
from pipeline.outbox.ops import ENTITY_SYNC, MENTIONS_SYNC
from pipeline.outbox.settings import GRAPH_ENTITY_EVIDENCE_CAP, GRAPH_MENTION_PARTS_CAP
from pipeline.outbox.store import Conn
from pipeline.settings import Settings

MentionKey = tuple[str, str]  # (root id, entity id)
# per namespace: (entities, mentions, entity edges), in Postgres and in the graph
Counts = tuple[int, int, int]


@dataclass
class EntityDrift:
    entities: Diff[str] = field(default_factory=lambda: Diff("entity nodes", "entity nodes"))
    mentions: Diff[MentionKey] = field(default_factory=lambda: Diff("MENTIONS", "MENTIONS"))
    edges: Diff[EntityEdgeKey] = field(
        default_factory=lambda: Diff("entity edges", "entity edges"))
    # namespace -> (Postgres counts, graph counts), for the namespaces where they differ
    namespaces: dict[str, tuple[Counts, Counts]] = field(default_factory=dict)
    # namespace of every drifted entity and root, for the outbox rows of a repair
    owners: dict[str, str] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return self.entities.clean and self.mentions.clean and self.edges.clean

    def summary(self) -> list[tuple[str, int]]:
        return [*self.entities.summary(), *self.mentions.summary(), *self.edges.summary()]

    def entities_to_sync(self) -> list[str]:
        """The entities a repair re-syncs (with their edges)."""
        ids = self.entities.drifted()
        for key in self.edges.drifted():
            ids |= {key.from_id, key.to_id}
        return sorted(ids)

    def roots_to_sync(self) -> list[str]:
        """The roots whose MENTIONS a repair re-syncs."""
        return sorted({root for root, _ in self.mentions.drifted()})


def verify_entities(conn: Conn, graph: Any, settings: Settings) -> EntityDrift:
    """Compare the whole entity layer of the graph with Postgres."""
    pg_entities = {str(e.id): e.state() for e in load_entities(conn, None).values()}
    pg_mentions = {(m.root_id, m.entity_id): m for m in
                   load_mentions(conn, None, parts_cap=GRAPH_MENTION_PARTS_CAP)}
    pg_edges = {e.key: e for e in load_entity_edges(
        conn, None, evidence_cap=GRAPH_ENTITY_EVIDENCE_CAP)}
    gr_entities = {e.id: e for e in
                   map(named_entity_state, graph.ro_query(cypher.ALL_NAMED_ENTITIES).result_set)}
    gr_mentions = {(m.root_id, m.entity_id): m for m in
                   map(mentions_state, graph.ro_query(cypher.ALL_MENTIONS).result_set)}
    gr_edges = {e.key: e for e in
                map(entity_edge_state, graph.ro_query(cypher.ALL_ENTITY_EDGES).result_set)}

    drift = EntityDrift(
        entities=Diff.of_states("entity nodes", "entity nodes", gr_entities, pg_entities),
        mentions=Diff.of_states("MENTIONS", "MENTIONS", gr_mentions, pg_mentions),
        edges=Diff.of_states("entity edges", "entity edges", gr_edges, pg_edges))
    for source in (gr_entities, pg_entities):
        drift.owners.update({k: v.namespace for k, v in source.items()})
    for states in (gr_mentions, pg_mentions):
        drift.owners.update({m.root_id: m.namespace for m in states.values()})
    for edges in (gr_edges, pg_edges):
        for e in edges.values():
            drift.owners.setdefault(e.key.from_id, e.namespace)
            drift.owners.setdefault(e.key.to_id, e.namespace)
    pg_counts = _counts([v.namespace for v in pg_entities.values()], pg_mentions.values(),
                        pg_edges.values())
    gr_counts = _counts([v.namespace for v in gr_entities.values()], gr_mentions.values(),
                        gr_edges.values())
    for ns in sorted(set(pg_counts) | set(gr_counts)):
        pair = (pg_counts.get(ns, (0, 0, 0)), gr_counts.get(ns, (0, 0, 0)))
        if pair[0] != pair[1]:
            drift.namespaces[ns] = pair
    return drift


def _counts(entity_namespaces: list[str], mentions: Iterable[MentionsState],
            edges: Iterable[EntityEdgeState]) -> dict[str, Counts]:
    ents = Counter(entity_namespaces)
    ments = Counter(m.namespace for m in mentions)
    edgs = Counter(e.namespace for e in edges)
    return {ns: (ents[ns], ments[ns], edgs[ns]) for ns in set(ents) | set(ments) | set(edgs)}


def repair_entities(conn: Conn, drift: EntityDrift) -> tuple[int, int]:
    """Queue the re-syncs that fix `drift`, in the caller's transaction; (entities, roots)."""
    entities, roots = drift.entities_to_sync(), drift.roots_to_sync()
    outbox.enqueue_many(conn, [outbox.Entry(_namespace(drift, i), uuid.UUID(i), ENTITY_SYNC)
                               for i in entities]
                        + [outbox.Entry(_namespace(drift, r), uuid.UUID(r), MENTIONS_SYNC)
                           for r in roots])
    return len(entities), len(roots)


def _namespace(drift: EntityDrift, aggregate: str) -> uuid.UUID:
    try:
        return uuid.UUID(drift.owners.get(aggregate, ""))
    except ValueError:  # a node made by hand with no (or a bad) namespace
        return uuid.UUID(int=0)
