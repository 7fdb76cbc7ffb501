"""The outbox relay: makes the graph agree with Postgres, then announces what became visible.

Outbox rows name an aggregate to re-sync, not a delta to replay: the relay reads the aggregate's
current state from Postgres and writes exactly that to the graph. Applying a row twice, late or
out of order therefore changes nothing twice. A single relay runs at a time (a Postgres advisory
lock), which keeps the graph's writes in commit order without per-row locking; other invocations
return at once. A graph outage leaves rows pending with a growing back-off; Postgres writes never
wait for the graph.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg_pool import ConnectionPool

from pipeline.domain.errors import Unavailable
from pipeline.domain.index_text import entity_index_text
from pipeline.domain.projection import Change, EdgeKey, EdgeState, NodeState
from pipeline.domain.retry import backoff_seconds
from pipeline.domain.settings import Settings
from pipeline.ingest.batch import EDGE_SYNC, NODE_SYNC
from pipeline.metrics import instruments as metrics
from pipeline.ports import ChangeSink, GraphWriter

log = logging.getLogger(__name__)

_RELAY_LOCK = 0x6272_6169_6E72  # one relay at a time, cluster-wide
_CHANGE_NS = uuid.UUID("6b1f4a52-6f27-4f0b-9d53-3c1d5a0e8c11")


@dataclass
class RelayStats:
    rows: int = 0
    nodes_upserted: int = 0
    nodes_deleted: int = 0
    edges_upserted: int = 0
    edges_deleted: int = 0
    changes: int = 0
    failed_rounds: int = 0
    skipped: bool = False
    errors: list[str] = field(default_factory=list)


_NODES = """
SELECT o.id, o.namespace_id, o.kind, o.title, o.summary, o.properties, o.content, o.parent_id,
       o.deleted_at, o.embedding, o.embedded_hash, o.embed_status, o.updated_at,
       (SELECT count(*) FROM objects x WHERE x.parent_id = o.id AND x.deleted_at IS NULL
          AND x.embed_status = 'pending') AS parts_pending,
       (SELECT count(*) FROM objects x WHERE x.parent_id = o.id AND x.deleted_at IS NULL)
FROM objects o WHERE o.id = ANY(%s)
"""

_EDGES = """
SELECT l.from_id, l.relation_type, l.to_id, l.namespace_id, l.meta, l.created_at, l.updated_at,
       l.deleted_at IS NULL
         AND f.deleted_at IS NULL AND f.parent_id IS NULL
         AND t.deleted_at IS NULL AND t.parent_id IS NULL AS live
FROM links l JOIN objects f ON f.id = l.from_id JOIN objects t ON t.id = l.to_id
WHERE (l.from_id, l.relation_type, l.to_id) IN (SELECT * FROM unnest(%s::uuid[], %s::text[],
                                                                     %s::uuid[]))
"""

_INCIDENT = """
SELECT l.from_id, l.relation_type, l.to_id FROM links l
JOIN objects f ON f.id = l.from_id JOIN objects t ON t.id = l.to_id
WHERE (l.from_id = ANY(%(ids)s) OR l.to_id = ANY(%(ids)s)) AND l.deleted_at IS NULL
  AND f.deleted_at IS NULL AND t.deleted_at IS NULL
"""


class OutboxRelay:
    """Applies pending outbox rows to the graph."""

    def __init__(self, settings: Settings, pool: ConnectionPool, graph: GraphWriter,
                 changes: ChangeSink) -> None:
        self.settings = settings
        self.pool = pool
        self.graph = graph
        self.changes = changes

    def run(self, *, max_rounds: int = 1000) -> RelayStats:
        """Drain the outbox (up to `max_rounds` batches) unless another relay is at it."""
        stats = RelayStats()
        with self.pool.connection() as lock_conn:
            got = lock_conn.execute("SELECT pg_try_advisory_lock(%s)", (_RELAY_LOCK,)).fetchone()
            if not got or not got[0]:
                stats.skipped = True
                return stats
            try:
                for _ in range(max_rounds):
                    if not self._round(stats):
                        break
            finally:
                lock_conn.execute("SELECT pg_advisory_unlock(%s)", (_RELAY_LOCK,))
        return stats

    def _round(self, stats: RelayStats) -> bool:
        """One batch; False when there was nothing to do or the graph is unavailable."""
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, op, aggregate_id, payload FROM outbox"
                " WHERE done_at IS NULL AND available_at <= now() ORDER BY id LIMIT %s",
                (self.settings.relay_batch_size,),
            ).fetchall()
        if not rows:
            return False
        ids = [row[0] for row in rows]
        try:
            with metrics.GRAPH_SECONDS.time():
                changes = self._apply(rows, stats)
            self.changes.publish(changes)
        except Unavailable as exc:
            metrics.GRAPH_FAILURES.inc()
            stats.failed_rounds += 1
            stats.errors.append(str(exc))
            log.warning("graph sync failed for %d outbox rows: %s", len(ids), exc)
            with self.pool.connection() as conn:
                delay = backoff_seconds(_attempts(conn, ids) + 1,
                                        cap=self.settings.relay_max_backoff)
                conn.execute(
                    "UPDATE outbox SET attempts = attempts + 1, last_error = %s,"
                    " available_at = now() + make_interval(secs => %s) WHERE id = ANY(%s)",
                    (str(exc)[:2000], delay, ids),
                )
            return False
        with self.pool.connection() as conn:
            conn.execute("UPDATE outbox SET done_at = now() WHERE id = ANY(%s)", (ids,))
        stats.rows += len(rows)
        stats.changes += len(changes)
        return True

    def _apply(self, rows: Sequence[tuple[Any, ...]], stats: RelayStats) -> list[Change]:
        node_ids = sorted({row[2] for row in rows if row[1] == NODE_SYNC})
        edge_keys = sorted({(uuid.UUID(p["from"]), p["relation_type"], uuid.UUID(p["to"]))
                            for _, op, _, p in rows if op == EDGE_SYNC})
        marker = f"{rows[0][0]}-{rows[-1][0]}"
        changes: list[Change] = []
        upserts, deletes = self._node_states(node_ids, marker, changes)
        announce = set(edge_keys)  # restored incident edges are not news
        if upserts:
            # Revived or new nodes get their live incident edges back (DETACH DELETE took them).
            with self.pool.connection() as conn:
                incident = conn.execute(_INCIDENT, {"ids": [uuid.UUID(n.id) for n in upserts]}
                                        ).fetchall()
            edge_keys = sorted(set(edge_keys) | {(r[0], r[1], r[2]) for r in incident})
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

    def _node_states(self, ids: Sequence[uuid.UUID], marker: str, changes: list[Change]
                     ) -> tuple[list[NodeState], list[str]]:
        if not ids:
            return [], []
        with self.pool.connection() as conn:
            found = {row[0]: row for row in conn.execute(_NODES, (list(ids),)).fetchall()}
        cap = self.settings.content_cap_chars
        upserts: list[NodeState] = []
        deletes: list[str] = []
        for oid in ids:
            row = found.get(oid)
            if row is None or row[8] is not None or row[7] is not None:
                deletes.append(str(oid))
                if row is not None and row[7] is None:
                    changes.append(_change("object.deleted", row[1], oid, {"id": str(oid)},
                                           marker))
                continue
            (_, ns, kind, title, summary, props, content, _, _, embedding, embedded_hash,
             status, updated_at, parts_pending, parts) = row
            # The graph mirrors the row's vector, even a stale one while a new one is computed:
            # rewriting vectors is what FalkorDB 4.16 handles worst (orphan index entries).
            done = status == "done" and embedding is not None
            upserts.append(NodeState(
                id=str(oid), namespace=str(ns), kind=kind, title=title,
                index_text=entity_index_text(title, summary, props or {}, content,
                                             content_cap_chars=cap),
                embedding=None if embedding is None else tuple(float(x) for x in embedding),
                embedded_hash=None if embedding is None else embedded_hash,
                updated_at=updated_at.isoformat(),
            ))
            if done and parts_pending == 0:
                changes.append(_change("object.indexed", ns, oid, {
                    "id": str(oid), "kind": kind, "title": title, "parts": int(parts),
                    "updated_at": updated_at.isoformat()}, marker))
        return upserts, deletes

    def _edge_states(self, keys: Sequence[tuple[uuid.UUID, str, uuid.UUID]], marker: str,
                     changes: list[Change], announce: set[tuple[uuid.UUID, str, uuid.UUID]]
                     ) -> tuple[list[EdgeState], list[EdgeKey]]:
        if not keys:
            return [], []
        with self.pool.connection() as conn:
            rows = conn.execute(_EDGES, ([k[0] for k in keys], [k[1] for k in keys],
                                         [k[2] for k in keys])).fetchall()
        found = {(r[0], r[1], r[2]): r for r in rows}
        ups: list[EdgeState] = []
        downs: list[EdgeKey] = []
        for key in keys:
            row = found.get(key)
            data = {"from": str(key[0]), "relation_type": key[1], "to": str(key[2])}
            if row is None or not row[7]:
                downs.append(EdgeKey(str(key[0]), key[1], str(key[2])))
                if row is not None and key in announce:
                    changes.append(_change("link.deleted", row[3], key[0], data, marker))
                continue
            meta = row[4] or {}
            ups.append(EdgeState(
                from_id=str(key[0]), to_id=str(key[2]), relation_type=key[1],
                namespace=str(row[3]), note=meta.get("note"), status=meta.get("status"),
                role=meta.get("role"), confidence=float(meta.get("confidence") or 0.0),
                evidence_id=meta.get("evidence_id"), created_at=row[5].isoformat(),
                updated_at=row[6].isoformat(),
            ))
            if key in announce:
                changes.append(_change("link.indexed", row[3], key[0], {**data, "meta": meta},
                                       marker))
        return ups, downs


def _attempts(conn: Any, ids: Sequence[int]) -> int:
    row = conn.execute("SELECT coalesce(max(attempts), 0) FROM outbox WHERE id = ANY(%s)",
                       (list(ids),)).fetchone()
    return int(row[0]) if row else 0


def _change(kind: str, namespace: Any, key: Any, data: dict[str, Any], marker: str) -> Change:
    return Change(type=kind, namespace=str(namespace), key=str(key), data=data,
                  id=str(uuid.uuid5(_CHANGE_NS, f"{kind}:{key}:{marker}:{sorted(data.items())}")))


def backlog(pool: ConnectionPool) -> int:
    """Outbox rows not yet applied (for the sweep and `status`)."""
    with pool.connection() as conn:
        row = conn.execute("SELECT count(*) FROM outbox WHERE done_at IS NULL").fetchone()
    return int(row[0]) if row else 0
