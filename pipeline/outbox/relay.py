"""The outbox relay: makes the graph agree with Postgres, then announces what became visible.

Outbox rows name an aggregate to re-sync, not a delta to replay: the relay reads the aggregate's
current state from Postgres and writes exactly that to the graph (object nodes and their links:
`node_sync`, `edge_sync`). Applying a row twice, late or out of order therefore changes nothing
twice. One relay writes at a time (a Postgres advisory lock), which keeps its graph writes in
commit order without per-row locking; other invocations return at once. A graph outage leaves
rows pending with a growing back-off; Postgres writes never wait for the graph. A row of a
retired op (`ops.RETIRED_OPS`, enqueued by a worker of an older version) is marked done unapplied.

A row the graph refuses (anything but an outage: a malformed payload, a value the graph will not
store) must not hold up the others: the batch is halved until the refused rows are alone, every
other row is applied, and each refused row is tried again with back-off, then, after
`RELAY_MAX_ATTEMPTS`, marked failed and dead-lettered (`graph_sync_failed`). Later rows of the
same aggregate are not held back either: a row re-syncs the aggregate's current state, so their
order does not matter, and a later row applies whatever state the graph accepts.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from pipeline.domain.errors import ConfigError, GraphSyncFailed, InvalidInput, Unavailable
from pipeline.domain.index_text import CONTENT_CAP_CHARS, entity_index_text
from pipeline.domain.projection import Change, EdgeKey, EdgeState, NodeState
from pipeline.domain.retry import backoff_seconds
from pipeline.metrics import instruments as metrics
from pipeline.outbox import store
from pipeline.outbox.aggregates import incident_links, load_edges, load_nodes
from pipeline.outbox.letters import outbox_letter
from pipeline.outbox.ops import (
    EDGE_SYNC,
    NODE_SYNC,
    RETIRED_OPS,
    LinkKey,
    edge_key,
    edge_payload,
)
from pipeline.outbox.relay_stats import RelayStats
from pipeline.outbox.settings import RELAY_MAX_BACKOFF, RelaySettings
from pipeline.outbox.single_writer import single_writer
from pipeline.outbox.store import OutboxRow
from pipeline.ports import ChangeSink, DeadLetterSink, GraphWriter

log = logging.getLogger(__name__)

_RELAY_LOCK = 0x6272_6169_6E72  # one relay at a time, cluster-wide
_CHANGE_NS = uuid.UUID("6b1f4a52-6f27-4f0b-9d53-3c1d5a0e8c11")
# Failures that are no row's fault: the batch waits (or the task fails) instead of blaming rows.
# A Postgres OperationalError is its connection or server; the relay's SQL only reads by id.
_NOT_THE_ROWS = (Unavailable, ConfigError, psycopg.OperationalError)
_OPS = {NODE_SYNC, EDGE_SYNC, *RETIRED_OPS}
_PROGRESS_EVERY = 10.0  # seconds between a long run's progress lines


class OutboxRelay:
    """Applies pending outbox rows to the graph."""

    def __init__(self, settings: RelaySettings, pool: ConnectionPool, graph: GraphWriter,
                 changes: ChangeSink, dead_letters: DeadLetterSink | None = None) -> None:
        self.settings = settings
        self.pool = pool
        self.graph = graph
        self.changes = changes
        self.dead_letters = dead_letters  # None: failed rows are only marked (replays)

    def run(self, *, max_rounds: int = 1000) -> RelayStats:
        """Drain the outbox (up to `max_rounds` batches) unless another relay is at it."""
        stats = RelayStats()
        with single_writer(self.pool, [_RELAY_LOCK]) as held:
            if not held:
                stats.skipped = True
                return stats
            said = time.monotonic()
            for _ in range(max_rounds):
                if not self._round(stats):
                    break
                if time.monotonic() - said >= _PROGRESS_EVERY:  # a long drain says how it goes
                    said = time.monotonic()
                    log.info("relay: %d rows in %d batches so far (%d coalesced); seconds %s",
                             stats.rows, stats.rounds, stats.coalesced, stats.seconds)
        return stats

    def _round(self, stats: RelayStats) -> bool:
        """One batch; False when there was nothing to do or the graph is unavailable."""
        size = self.settings.relay_batch_size
        with stats.timed("claim"), self.pool.connection() as conn:
            rows = store.claim_due(conn, size)
        return bool(rows) and self._batch(rows, size, stats)

    def _batch(self, rows: Sequence[OutboxRow], size: int, stats: RelayStats) -> bool:
        """Apply one claimed batch (of `size` rows and those coalesced with them); False when
        the graph is unavailable."""
        stats.rounds += 1
        stats.coalesced += max(0, len(rows) - size)
        try:
            with metrics.GRAPH_SECONDS.time():
                self._apply_isolating(rows, stats)
        except Unavailable as exc:
            metrics.GRAPH_FAILURES.inc()
            stats.failed_rounds += 1
            stats.errors.append(str(exc))
            log.warning("graph sync failed for %d outbox rows: %s", len(rows), exc)
            with self.pool.connection() as conn:  # the rows not applied before the outage
                store.postpone(conn, [row.id for row in rows], str(exc),
                               max_backoff=RELAY_MAX_BACKOFF)
            return False
        return True

    def _apply_isolating(self, rows: Sequence[OutboxRow], stats: RelayStats) -> None:
        """Apply `rows` and mark them done. When the graph refuses the batch (not an outage,
        which raises), halve it until each refused row is alone: it is retried or failed, every
        other row applies. Re-applying the good half is harmless (state-based sync)."""
        try:
            changes = self._apply(rows, stats)
            with stats.timed("publish"):
                self.changes.publish(changes)
        except _NOT_THE_ROWS:
            raise
        except Exception as exc:
            if len(rows) == 1:
                self._refused(rows[0], exc, stats)
                return
            log.warning("graph refused a batch of %d outbox rows (%s: %s); isolating the row",
                        len(rows), type(exc).__name__, exc)
            half = len(rows) // 2
            self._apply_isolating(rows[:half], stats)
            self._apply_isolating(rows[half:], stats)
            return
        with stats.timed("done"), self.pool.connection() as conn:
            store.mark_done(conn, [row.id for row in rows])
        stats.rows += len(rows)
        stats.changes += len(changes)

    def _refused(self, row: OutboxRow, exc: Exception, stats: RelayStats) -> None:
        """The graph refused this row alone: try again after a back-off, or, out of tries,
        dead-letter it and mark it failed (not before the letter is acknowledged)."""
        failures = row.failures + 1
        reason = f"{type(exc).__name__}: {exc}"
        delay = backoff_seconds(failures, cap=RELAY_MAX_BACKOFF)
        if failures < self.settings.relay_max_attempts:
            log.warning("outbox row %d (%s %s) refused by the graph, try %d of %d: %s",
                        row.id, row.op, row.aggregate_id, failures,
                        self.settings.relay_max_attempts, reason)
            with self.pool.connection() as conn:
                store.record_failure(conn, row.id, reason, retry_in=delay)
            stats.rows_retrying += 1
            return
        error = GraphSyncFailed(f"outbox row {row.id} ({row.op} {row.aggregate_id}) was refused "
                                f"by the graph {failures} times: {reason}")
        log.error("%s", error.message)
        if self.dead_letters is not None:
            try:
                self.dead_letters.send([outbox_letter(row, error)])
            except Unavailable:
                log.error("dead-letter topic unavailable; outbox row %d stays pending", row.id)
                with self.pool.connection() as conn:
                    store.record_failure(conn, row.id, reason, retry_in=delay)
                return
        with self.pool.connection() as conn:
            store.record_failure(conn, row.id, error.message, retry_in=None)
        stats.rows_failed += 1

    def _apply(self, rows: Sequence[OutboxRow], stats: RelayStats) -> list[Change]:
        """Apply `rows`; the change events."""
        unknown = sorted({row.op for row in rows} - _OPS)
        if unknown:  # skipping it would mark it done: lost
            raise InvalidInput(f"unknown outbox op {unknown[0]!r}", field="op")
        stats.retired += sum(1 for row in rows if row.op in RETIRED_OPS)
        node_ids = sorted({row.aggregate_id for row in rows if row.op == NODE_SYNC})
        edge_keys = sorted({edge_key(row.payload) for row in rows if row.op == EDGE_SYNC})
        marker = f"{rows[0].id}-{rows[-1].id}"
        changes: list[Change] = []
        with stats.timed("objects"):
            upserts, deletes = self._node_states(node_ids, marker, changes,
                                                 [row.id for row in rows])
            announce = set(edge_keys)  # restored incident edges are not news
            stored = self.graph.node_times([n.id for n in upserts]) if upserts else {}
            fresh = [uuid.UUID(n.id) for n in upserts if n.id not in stored]
            if fresh:
                # Revived or new nodes (or placeholders) get their live incident edges back:
                # DETACH DELETE took them, and a link synced while its endpoint was missing
                # could not be written. A node the graph holds keeps its edges (MERGE), so its
                # syncs (the one after embedding, every re-put) do not re-write them all.
                with self.pool.connection() as conn:
                    incident = incident_links(conn, fresh)
                edge_keys = sorted(set(edge_keys) | set(incident))
            edge_up, edge_down = self._edge_states(edge_keys, marker, changes, announce)
            self.graph.upsert_nodes(upserts)
            self.graph.upsert_edges(edge_up)
            self.graph.delete_edges(edge_down)
            self.graph.delete_nodes(deletes)
        stats.nodes_upserted += len(upserts)
        stats.nodes_deleted += len(deletes)
        stats.edges_upserted += len(edge_up)
        stats.edges_deleted += len(edge_down)
        return changes

    def _node_states(self, ids: Sequence[uuid.UUID], marker: str, changes: list[Change],
                     claimed: Sequence[int]) -> tuple[list[NodeState], list[str]]:
        if not ids:
            return [], []
        with self.pool.connection() as conn:
            found = load_nodes(conn, ids)
            # An object with another node row still to apply is announced by that row: it
            # re-reads the state. Without this, the consumer's row of a put, claimed alone and
            # read just after the embedding committed, announced `object.indexed`, and so did
            # the embedding's row behind it. The embedding marks its rows done and enqueues its
            # node row in one transaction, so a state read as done has that row visible here.
            followed = set(store.pending_node_syncs(conn, ids, claimed))
        cap = CONTENT_CAP_CHARS
        upserts: list[NodeState] = []
        deletes: list[str] = []
        for oid in ids:
            row = found.get(oid)
            if row is None or row.deleted_at is not None or row.parent_id is not None:
                deletes.append(str(oid))
                if row is not None and row.parent_id is None:
                    changes.append(_change("object.deleted", row.namespace_id, oid,
                                           {"id": str(oid)}, marker))
                continue
            # The graph mirrors the row's vector, even a stale one while a new one is computed:
            # rewriting vectors is what FalkorDB 4.16 handles worst (orphan index entries).
            done = row.embed_status == "done" and row.embedding is not None
            upserts.append(NodeState(
                id=str(oid), namespace=str(row.namespace_id), kind=row.kind, title=row.title,
                index_text=entity_index_text(row.title, row.summary, row.properties or {},
                                             row.content, content_cap_chars=cap),
                embedding=None if row.embedding is None
                else tuple(float(x) for x in row.embedding),
                embedded_hash=None if row.embedding is None else row.embedded_hash,
                updated_at=row.updated_at.isoformat(),
            ))
            if done and row.parts_pending == 0 and oid not in followed:
                changes.append(_change("object.indexed", row.namespace_id, oid, {
                    "id": str(oid), "kind": row.kind, "title": row.title,
                    "parts": int(row.parts), "updated_at": row.updated_at.isoformat()}, marker))
        return upserts, deletes

    def _edge_states(self, keys: Sequence[LinkKey], marker: str, changes: list[Change],
                     announce: set[LinkKey]) -> tuple[list[EdgeState], list[EdgeKey]]:
        if not keys:
            return [], []
        with self.pool.connection() as conn:
            found = load_edges(conn, keys)
        ups: list[EdgeState] = []
        downs: list[EdgeKey] = []
        for key in keys:
            row = found.get(key)
            data = edge_payload(*key)
            if row is None or not row.live:
                downs.append(EdgeKey(str(key[0]), key[1], str(key[2])))
                if row is not None and key in announce:
                    changes.append(_change("link.deleted", row.namespace_id, key[0], data,
                                           marker))
                continue
            meta = row.meta or {}
            ups.append(EdgeState(
                from_id=str(key[0]), to_id=str(key[2]), relation_type=key[1],
                namespace=str(row.namespace_id), note=meta.get("note"),
                status=meta.get("status"), role=meta.get("role"),
                confidence=float(meta.get("confidence") or 0.0),
                evidence_id=meta.get("evidence_id"), created_at=row.created_at.isoformat(),
                updated_at=row.updated_at.isoformat(),
            ))
            if key in announce:
                changes.append(_change("link.indexed", row.namespace_id, key[0],
                                       {**data, "meta": meta}, marker))
        return ups, downs


def _change(kind: str, namespace: Any, key: Any, data: dict[str, Any], marker: str) -> Change:
    return Change(type=kind, namespace=str(namespace), key=str(key), data=data,
                  id=str(uuid.uuid5(_CHANGE_NS, f"{kind}:{key}:{marker}:{sorted(data.items())}")))
