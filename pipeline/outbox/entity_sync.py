"""The relay's entity-layer step: make the graph's NamedEntity nodes, MENTIONS and entity edges
agree with Postgres for the aggregates one batch names.

Like objects and links, every aggregate is re-synced from its current state
(`entity_aggregates`), so a row applied twice or out of order changes nothing twice:

- a root (`MENTIONS_SYNC`, from extraction, and for a node new to the graph or rewritten from
  the relay's object lane) gets exactly the MENTIONS its live rows justify; the entities on
  either side of a change (newly or formerly mentioned) are re-checked. A deleted node's
  MENTIONS go with it (the object lane's DETACH), and its entities come as `ENTITY_SYNC` rows
  the object lane read from the graph before;
- an entity (`ENTITY_SYNC`, or re-checked above) is written when it is projected and its stored
  node differs, and removed (DETACH) when it is not projected. When its node is new, or the row
  named it, its entity edges are re-synced whole: an edge is written once both its entities are
  in the graph, so the second one's appearance writes it;
- a merged entity hands over: the roots that MENTIONED it are re-synced (their rows now name
  the survivor), and so is the survivor.

The graph is read (the stored entity nodes, MENTIONS and edges) to diff against, so re-applying
a row writes nothing. A single entity lane runs at a time, and it alone writes this state: the
object lane, running beside it, only removes object nodes, and a MENTIONS edge that vanishes
with its node between the read and the write is one the entity lane would remove anyway (a
write to a missing node is skipped).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from psycopg_pool import ConnectionPool

from pipeline.domain.projection import EntityEdgeKey, EntityEdgeState
from pipeline.outbox.entity_aggregates import (
    load_entities,
    load_entity_edges,
    load_entity_edges_between,
    load_mentions,
    mentioned_by,
)
from pipeline.outbox.settings import (
    GRAPH_ENTITY_EVIDENCE_CAP,
    GRAPH_MENTION_PARTS_CAP,
    RelaySettings,
)
from pipeline.outbox.store import Conn
from pipeline.ports import GraphWriter

log = logging.getLogger(__name__)
_SLOW_SECONDS = 1.0
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# Merges chain rarely (a survivor merged again later); the relay follows a few links per batch
# and the survivor's own ENTITY_SYNC (enqueued by its merge) covers the rest.
_MAX_MERGE_HOPS = 4


@dataclass(frozen=True)
class StateDiff(Generic[K]):
    """How `current` differs from `desired`: keys only desired, in both but different, only
    current (each in the order of its mapping)."""

    missing: list[K]
    stale: list[K]
    extra: list[K]


def compare_states(current: Mapping[K, V], desired: Mapping[K, V]) -> StateDiff[K]:
    """Compare two keyed states (the graph's, and Postgres')."""
    return StateDiff(missing=[k for k in desired if k not in current],
                     stale=[k for k, v in desired.items() if k in current and current[k] != v],
                     extra=[k for k in current if k not in desired])


def diff_states(current: Mapping[K, V], desired: Mapping[K, V]) -> tuple[list[V], list[K]]:
    """What to write (desired states missing or different in `current`) and what to delete
    (keys of `current` not desired)."""
    diff = compare_states(current, desired)
    return [desired[k] for k in diff.missing + diff.stale], diff.extra


@dataclass
class EntitySyncStats:
    entities_upserted: int = 0
    entities_deleted: int = 0
    mentions_upserted: int = 0
    mentions_deleted: int = 0
    edges_upserted: int = 0
    edges_deleted: int = 0


class EntitySync:
    """Applies the entity layer of one relay batch (see the module docstring)."""

    def __init__(self, settings: RelaySettings, pool: ConnectionPool, graph: GraphWriter) -> None:
        self.settings = settings
        self.pool = pool
        self.graph = graph

    def apply(self, roots: Sequence[uuid.UUID], entity_ids: Sequence[uuid.UUID],
              partners: Mapping[uuid.UUID, set[uuid.UUID]] | None = None) -> EntitySyncStats:
        """Re-sync the MENTIONS of `roots` and the entities `entity_ids` (with their edges).

        An entity of `partners` whose node the graph already holds gets only its edges with
        the entities listed re-synced (the rows that named it said which pairs changed); the
        other entities of `entity_ids`, and nodes new to the graph, get every edge re-synced.
        Object nodes must already be written (MENTIONS attach to existing nodes only).
        """
        partners = partners or {}
        stats = EntitySyncStats()
        if not roots and not entity_ids:
            return stats
        started = time.perf_counter()
        root_set = set(roots)
        with self.pool.connection() as conn:
            named = self._follow_merges(conn, set(entity_ids), root_set)
            desired = {(m.root_id, m.entity_id): m for m in
                       load_mentions(conn, sorted(root_set), parts_cap=GRAPH_MENTION_PARTS_CAP)
                       if uuid.UUID(m.root_id) in root_set}
            current = {(m.root_id, m.entity_id): m
                       for m in self.graph.fetch_mentions([str(r) for r in sorted(root_set)])}
            touched = {uuid.UUID(e) for _, e in desired} | {uuid.UUID(e) for _, e in current}
            touched |= mentioned_by(conn, sorted(root_set)) | set(named)
            rows = load_entities(conn, sorted(touched))
        projected = {str(eid): row.state() for eid, row in sorted(rows.items())
                     if row.projected}
        stored = {e.id: e for e in
                  self.graph.fetch_named_entities([str(e) for e in sorted(touched)])}
        gone = sorted(eid for eid in stored if eid not in projected)
        # whole edge re-sync: entities the batch names without narrowing it, and nodes new to
        # the graph; the pairs the batch changed for the others
        resync = sorted(uuid.UUID(eid) for eid in projected if eid not in stored or (
            uuid.UUID(eid) in named and uuid.UUID(eid) not in partners))
        whole = set(resync)
        pairs = sorted({(min(e, p), max(e, p)) for e, ps in partners.items()
                        if e in named and e not in whole and str(e) in projected
                        for p in ps if p not in whole})
        changed, _ = diff_states(stored, projected)
        self.graph.upsert_named_entities(changed)
        stats.entities_upserted = len(changed)
        marks = [time.perf_counter()]
        self._sync_edges(resync, stats)
        marks.append(time.perf_counter())
        self._sync_pairs(pairs, stats)
        marks.append(time.perf_counter())
        ups, downs = diff_states(current, desired)
        self.graph.delete_mentions(downs)
        self.graph.upsert_mentions(ups)
        stats.mentions_upserted, stats.mentions_deleted = len(ups), len(downs)
        self.graph.delete_named_entities(gone)
        stats.entities_deleted = len(gone)
        seconds = time.perf_counter() - started
        if seconds >= _SLOW_SECONDS:  # what made a batch slow, for the relay's log
            log.info("entity sync took %.1f s (reads %.1f, whole edges %.1f, pairs %.1f): %d"
                     " roots, %d entities named, %d touched, %d edge re-syncs whole (%s), %d"
                     " pairs; wrote %d entities, %d edges, %d mentions",
                     seconds, marks[0] - started, marks[1] - marks[0], marks[2] - marks[1],
                     len(root_set), len(named), len(touched), len(resync),
                     f"new to the graph: {sum(1 for e in resync if str(e) not in stored)}",
                     len(pairs), stats.entities_upserted, stats.edges_upserted,
                     stats.mentions_upserted)
        return stats

    def _follow_merges(self, conn: Conn, named: set[uuid.UUID], roots: set[uuid.UUID]
                       ) -> set[uuid.UUID]:
        """`named` plus the survivors of its merged entities; the roots whose MENTIONS point at
        a merged entity in the graph join `roots` (their rows now name the survivor)."""
        frontier = set(named)
        for _ in range(_MAX_MERGE_HOPS):
            if not frontier:
                break
            rows = load_entities(conn, sorted(frontier))
            merged = {eid: row.merged_into for eid, row in rows.items()
                      if row.merged_into is not None}
            if not merged:
                break
            pointing = self.graph.fetch_mentions_to([str(e) for e in sorted(merged)])
            roots.update(uuid.UUID(r) for r in pointing)
            frontier = {s for s in merged.values() if s is not None} - named
            named |= frontier
        return named

    def _sync_edges(self, ids: Sequence[uuid.UUID], stats: EntitySyncStats) -> None:
        if not ids:
            return
        with self.pool.connection() as conn:
            desired = {e.key: e for e in load_entity_edges(
                conn, ids, evidence_cap=GRAPH_ENTITY_EVIDENCE_CAP)}
        current = {e.key: e for e in self.graph.fetch_entity_edges([str(i) for i in ids])}
        self._write_edges(current, desired, stats)

    def _sync_pairs(self, pairs: Sequence[tuple[uuid.UUID, uuid.UUID]],
                    stats: EntitySyncStats) -> None:
        """The edges between the two entities of each pair, and only those."""
        if not pairs:
            return
        with self.pool.connection() as conn:
            desired = {e.key: e for e in load_entity_edges_between(
                conn, pairs, evidence_cap=GRAPH_ENTITY_EVIDENCE_CAP)}
        current = {e.key: e for e in self.graph.fetch_entity_edges_between(
            [(str(a), str(b)) for a, b in pairs])}
        self._write_edges(current, desired, stats)

    def _write_edges(self, current: Mapping[EntityEdgeKey, EntityEdgeState],
                     desired: Mapping[EntityEdgeKey, EntityEdgeState],
                     stats: EntitySyncStats) -> None:
        """Make the graph's edges `current` into `desired`."""
        ups, downs = diff_states(current, desired)
        self.graph.delete_entity_edges(downs)
        self.graph.upsert_entity_edges(ups)
        stats.edges_upserted += len(ups)
        stats.edges_deleted += len(downs)
