"""The `outbox` table: the only SQL on it.

Writers enqueue inside their own transaction (that is what makes the outbox transactional: the
row commits with the change it describes, or not at all); the relay claims due rows, marks them
done or postpones them with a growing back-off; operators read the backlog and purge finished
rows. Ops and payloads are `pipeline.outbox.ops`'.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from pipeline.domain.retry import backoff_seconds
from pipeline.outbox.ops import EDGE_SYNC, NODE_SYNC

Conn = psycopg.Connection[Any]

_INSERT = ("INSERT INTO outbox (namespace_id, aggregate_id, op, payload)"
           " VALUES (%s, %s, %s, %s)")


class Entry(NamedTuple):
    """One row to enqueue."""

    namespace: uuid.UUID
    aggregate_id: uuid.UUID
    op: str
    payload: dict[str, Any] | None = None


class OutboxRow(NamedTuple):
    """A row as the relay claims it."""

    id: int
    op: str
    aggregate_id: uuid.UUID
    payload: dict[str, Any]


@dataclass(frozen=True)
class OpBacklog:
    """The rows of one op not yet applied."""

    op: str
    count: int
    oldest_seconds: float
    max_attempts: int
    last_error: str | None  # of a row that failed at least once


# -- writing --------------------------------------------------------------------------------


def enqueue(conn: Conn, namespace: uuid.UUID, aggregate_id: uuid.UUID, op: str,
            payload: dict[str, Any] | None = None) -> None:
    """Record what the graph must do, in the caller's transaction."""
    conn.execute(_INSERT, (namespace, aggregate_id, op, Jsonb(payload or {})))


def enqueue_many(conn: Conn, entries: Iterable[Entry]) -> None:
    """Record many rows, in the caller's transaction."""
    with conn.cursor() as cur:
        cur.executemany(_INSERT, [(e.namespace, e.aggregate_id, e.op, Jsonb(e.payload or {}))
                                  for e in entries])


def enqueue_visible(conn: Conn) -> tuple[int, int]:
    """Queue every visible first-class object and link for a re-sync (a graph rebuild), in the
    caller's transaction; (node rows, edge rows)."""
    nodes = conn.execute(
        "INSERT INTO outbox (namespace_id, aggregate_id, op)"
        " SELECT namespace_id, id, %s FROM objects"
        " WHERE parent_id IS NULL AND deleted_at IS NULL", (NODE_SYNC,)).rowcount
    # the payload `ops.edge_payload` builds, built by Postgres
    edges = conn.execute(
        "INSERT INTO outbox (namespace_id, aggregate_id, op, payload)"
        " SELECT namespace_id, from_id, %s, jsonb_build_object('from', from_id::text,"
        " 'relation_type', relation_type, 'to', to_id::text) FROM links"
        " WHERE deleted_at IS NULL", (EDGE_SYNC,)).rowcount
    return nodes, edges


# -- relaying -------------------------------------------------------------------------------


def claim_due(conn: Conn, limit: int) -> list[OutboxRow]:
    """The oldest rows not done whose back-off has passed. Not locked: a single relay runs at a
    time (it holds an advisory lock)."""
    rows = conn.execute(
        "SELECT id, op, aggregate_id, payload FROM outbox"
        " WHERE done_at IS NULL AND available_at <= now() ORDER BY id LIMIT %s",
        (limit,),
    ).fetchall()
    return [OutboxRow(*row) for row in rows]


def mark_done(conn: Conn, ids: Sequence[int]) -> None:
    """The rows were applied."""
    conn.execute("UPDATE outbox SET done_at = now() WHERE id = ANY(%s)", (list(ids),))


def postpone(conn: Conn, ids: Sequence[int], error: str, *, max_backoff: float) -> None:
    """The rows could not be applied: count the attempt, keep the error, and make them due again
    after a back-off that grows with the attempts (up to `max_backoff` seconds)."""
    row = conn.execute("SELECT coalesce(max(attempts), 0) FROM outbox WHERE id = ANY(%s)",
                       (list(ids),)).fetchone()
    delay = backoff_seconds((int(row[0]) if row else 0) + 1, cap=max_backoff)
    conn.execute(
        "UPDATE outbox SET attempts = attempts + 1, last_error = %s,"
        " available_at = now() + make_interval(secs => %s) WHERE id = ANY(%s)",
        (error[:2000], delay, list(ids)),
    )


# -- reading and purging --------------------------------------------------------------------


def backlog(pool: ConnectionPool) -> int:
    """Rows not yet applied (the sweep, rebuilds and replays wait for it to reach 0)."""
    with pool.connection() as conn:
        row = conn.execute("SELECT count(*) FROM outbox WHERE done_at IS NULL").fetchone()
    return int(row[0]) if row else 0


def backlog_by_op(conn: Conn) -> list[OpBacklog]:
    """The rows not yet applied, per op (for `brainstream status` and the metrics exporter)."""
    rows = conn.execute(
        "SELECT op, count(*), extract(epoch FROM now() - min(created_at)),"
        " max(attempts), max(last_error) FILTER (WHERE attempts > 0)"
        " FROM outbox WHERE done_at IS NULL GROUP BY op ORDER BY op").fetchall()
    return [OpBacklog(str(r[0]), int(r[1]), float(r[2]), int(r[3]), r[4]) for r in rows]


def delete_done(conn: Conn, older_than_seconds: float) -> int:
    """Delete rows applied more than `older_than_seconds` ago; how many."""
    cur = conn.execute("DELETE FROM outbox WHERE done_at < now() - make_interval(secs => %s)",
                       (older_than_seconds,))
    return cur.rowcount
