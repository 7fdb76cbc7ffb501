"""The `outbox` table: the only SQL on it.

Writers enqueue inside their own transaction (that is what makes the outbox transactional: the
row commits with the change it describes, or not at all); the relay claims due rows, marks them
done or postpones them with a growing back-off, and fails a row the graph keeps refusing
(`failed_at`, dead-lettered by the relay; `dlq retry` re-queues it); operators read the backlog
and purge finished rows. Ops and payloads are `pipeline.outbox.ops`'.
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

# Rows given as parallel arrays, inserted in array order (`enqueue_many`).
_INSERT_MANY = ("INSERT INTO outbox (namespace_id, aggregate_id, op, payload)"
                " SELECT ns, id, op, payload FROM unnest(%b::uuid[], %b::uuid[], %b::text[],"
                " %b::jsonb[]) WITH ORDINALITY AS r(ns, id, op, payload, n) ORDER BY n")


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
    namespace_id: uuid.UUID
    failures: int  # earlier tries that failed because of this row (not an outage)


@dataclass(frozen=True)
class OpBacklog:
    """The rows of one op not yet applied."""

    op: str
    count: int
    oldest_seconds: float
    max_attempts: int
    last_error: str | None  # of a row that failed at least once
    failed: int  # rows the graph kept refusing: dead-lettered, waiting for `dlq retry`


# -- writing --------------------------------------------------------------------------------


def enqueue(conn: Conn, namespace: uuid.UUID, aggregate_id: uuid.UUID, op: str,
            payload: dict[str, Any] | None = None) -> None:
    """Record what the graph must do, in the caller's transaction."""
    conn.execute(_INSERT, (namespace, aggregate_id, op, Jsonb(payload or {})))


def enqueue_many(conn: Conn, entries: Iterable[Entry]) -> None:
    """Record many rows, in the caller's transaction, with one statement (in the given order:
    ids follow it, and the relay applies rows by id)."""
    rows = list(entries)
    if rows:
        conn.execute(_INSERT_MANY, ([e.namespace for e in rows], [e.aggregate_id for e in rows],
                                    [e.op for e in rows], [Jsonb(e.payload or {}) for e in rows]))


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


def pending_node_syncs(conn: Conn, ids: Sequence[uuid.UUID], claimed: Sequence[int]
                       ) -> list[uuid.UUID]:
    """Those of `ids` with a node row not yet applied besides the `claimed` rows (one that
    failed for good waits for `dlq retry` and does not count)."""
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT aggregate_id FROM outbox WHERE aggregate_id = ANY(%s) AND op = %s"
        " AND done_at IS NULL AND failed_at IS NULL AND NOT (id = ANY(%s))",
        (list(ids), NODE_SYNC, list(claimed))).fetchall()]


# The oldest due rows, then the later due rows that ask for the same re-sync as one of them
# (same op and aggregate; an edge row also the same link): the relay reads each aggregate's
# state after it claims, so that read covers every row committed before it. Behind a backlog,
# an object's node row after embedding rides with its node row of the consumer's commit. The
# head walks the partial index of due rows (`outbox_due`, migration 0043) in id order and stops
# after `limit` of them.
_CLAIM = (
    "WITH head AS (SELECT id, op, aggregate_id, payload, namespace_id, failures FROM outbox"
    " WHERE done_at IS NULL AND failed_at IS NULL AND available_at <= now()"
    " ORDER BY id LIMIT %(limit)s)"
    " SELECT * FROM head UNION ALL"
    " (SELECT o.id, o.op, o.aggregate_id, o.payload, o.namespace_id, o.failures FROM outbox o"
    " WHERE o.done_at IS NULL AND o.failed_at IS NULL AND o.available_at <= now()"
    " AND o.id > (SELECT max(id) FROM head)"
    " AND o.aggregate_id IN (SELECT aggregate_id FROM head)"
    " AND EXISTS (SELECT 1 FROM head h WHERE h.aggregate_id = o.aggregate_id AND h.op = o.op"
    " AND (o.op <> %(edge)s OR h.payload = o.payload))"
    " ORDER BY o.id LIMIT %(absorb)s)"
    " ORDER BY id")


def claim_due(conn: Conn, limit: int, *, absorb: int | None = None) -> list[OutboxRow]:
    """The oldest `limit` rows neither done nor failed whose back-off has passed, with up to
    `absorb` (default: `limit`) later due rows that re-sync the same aggregates (coalesced:
    applying them with the first is what applying them later would do). Not locked: a single
    relay runs at a time (it holds the relay's advisory lock)."""
    rows = conn.execute(_CLAIM, {"limit": limit, "absorb": limit if absorb is None else absorb,
                                 "edge": EDGE_SYNC}).fetchall()
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
        " available_at = now() + make_interval(secs => %s) WHERE id = ANY(%s)"
        " AND done_at IS NULL",
        (error[:2000], delay, list(ids)),
    )


def record_failure(conn: Conn, row_id: int, error: str, *, retry_in: float | None) -> None:
    """The row failed because of itself (the graph refused it): count the failure and keep the
    error; make it due again in `retry_in` seconds, or, with None, mark it failed for good."""
    conn.execute(
        "UPDATE outbox SET attempts = attempts + 1, failures = failures + 1,"
        " last_error = %(error)s, available_at = now() + make_interval(secs => %(delay)s),"
        " failed_at = CASE WHEN %(fail)s THEN now() END"
        " WHERE id = %(id)s AND done_at IS NULL",
        {"error": error[:2000], "delay": retry_in or 0.0, "fail": retry_in is None,
         "id": row_id},
    )


def requeue_failed(conn: Conn, row_id: int, aggregate_id: uuid.UUID) -> bool:
    """Make a failed row due again with a fresh count (`dlq retry`); False when no such failed row
    exists (re-queued already, or the letter came from another index generation's outbox)."""
    cur = conn.execute(
        "UPDATE outbox SET failed_at = NULL, failures = 0, attempts = 0, available_at = now()"
        " WHERE id = %s AND aggregate_id = %s AND failed_at IS NOT NULL",
        (row_id, aggregate_id))
    return cur.rowcount == 1


# -- reading and purging --------------------------------------------------------------------


def backlog(pool: ConnectionPool) -> int:
    """Rows not yet applied and not failed (the sweep, rebuilds and replays wait for it to reach
    0; a failed row waits for an operator, in `backlog_by_op`)."""
    with pool.connection() as conn:
        row = conn.execute("SELECT count(*) FROM outbox"
                           " WHERE done_at IS NULL AND failed_at IS NULL").fetchone()
    return int(row[0]) if row else 0


def backlog_by_op(conn: Conn) -> list[OpBacklog]:
    """The rows not yet applied, and the failed ones, per op (for `brainstream status` and the
    metrics exporter)."""
    rows = conn.execute(
        "SELECT op, count(*) FILTER (WHERE failed_at IS NULL),"
        " extract(epoch FROM now() - min(created_at) FILTER (WHERE failed_at IS NULL)),"
        " max(attempts), max(last_error) FILTER (WHERE attempts > 0),"
        " count(*) FILTER (WHERE failed_at IS NOT NULL)"
        " FROM outbox WHERE done_at IS NULL GROUP BY op ORDER BY op").fetchall()
    return [OpBacklog(str(r[0]), int(r[1]), float(r[2] or 0.0), int(r[3]), r[4], int(r[5]))
            for r in rows]


def delete_done(conn: Conn, older_than_seconds: float) -> int:
    """Delete rows applied more than `older_than_seconds` ago; how many."""
    cur = conn.execute("DELETE FROM outbox WHERE done_at < now() - make_interval(secs => %s)",
                       (older_than_seconds,))
    return cur.rowcount
