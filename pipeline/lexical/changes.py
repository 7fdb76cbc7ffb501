"""The lexical index's SQL: its change log (`lexical_log`, filled by triggers on `objects`,
migrations/0026 and 0056), the replicas following it (`lexical_replicas`), and the current state
of the roots it names.

A log row names a root; a replica re-reads the root's searchable rows (its visible parts, or
the root itself while it has none) with what filters judge (the root's kind, title, times and
properties) and the lexemes of each row's `lexical` tsvector, at their positions. Rows stay in
the log until every live replica has passed them (`prune`).

A replica's cursor is a (transaction id, row id) pair: every row at or below it is applied. A
follower reads only rows of transactions below the horizon (`horizon`: the oldest transaction
still running), a set no row can join later, in (xid, id) order, so its cursor never skips a row
that commits late (migrations/0056).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import psycopg

from pipeline.lexical.documents import RowDocument

Conn = psycopg.Connection[Any]

# One lock for registering a replica and pruning the log, so a prune never removes the rows
# above the cursor a replica is registering (a transaction-scoped advisory lock).
LOG_LOCK = 0x6272_6C65_786C
# A replica not seen for this long no longer holds the log back: its rows are pruned, its
# registration forgotten, and it builds itself again from Postgres if it returns. An hour
# covers a restart or a deploy; a host down longer pays one rebuild instead of the log
# growing without bound.
REPLICA_TTL_SECONDS = 3600


@dataclass(frozen=True, order=True)
class Cursor:
    """Every log row at or below (xid, id) is applied."""

    xid: int
    id: int = 0


class Logged(NamedTuple):
    """One log row: re-sync this root of this namespace."""

    xid: int
    id: int
    namespace_id: uuid.UUID
    root_id: uuid.UUID


@dataclass(frozen=True)
class ReplicaRow:
    """One registered replica, with what it has not applied yet."""

    replica: str
    host: str
    data_dir: str
    cursor: Cursor
    built_at: datetime
    seen_at: datetime
    pending: int  # log rows beyond its cursor (counted up to PENDING_COUNT_CAP)
    lag_seconds: float  # age of the oldest of them (0 when none)


# `status` counts a replica's pending rows up to this many (a far-behind replica's count costs
# a scan of its backlog; beyond this the figure says "at least").
PENDING_COUNT_CAP = 100_000


def horizon(conn: Conn) -> int:
    """The oldest transaction id still running (or the next one when none runs): the log rows
    of every transaction below it are committed (or gone) and no other can join them."""
    row = conn.execute("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint").fetchone()
    assert row is not None
    return int(row[0])


def after(conn: Conn, cursor: Cursor, below: int, limit: int) -> list[Logged]:
    """Up to `limit` log rows beyond `cursor` of transactions below `below`, in cursor order."""
    rows = conn.execute(
        "SELECT xid::text::bigint, id, namespace_id, root_id FROM lexical_log"
        " WHERE (xid, id) > (%s::text::xid8, %s) AND xid < %s::text::xid8"
        " ORDER BY xid, id LIMIT %s",
        (str(cursor.xid), cursor.id, str(below), limit)).fetchall()
    return [Logged(int(r[0]), int(r[1]), r[2], r[3]) for r in rows]


# How long the first row beyond a cursor has waited.
LAG_SQL = ("SELECT extract(epoch FROM now() - created_at)::float8 FROM lexical_log"
           " WHERE (xid, id) > (%s::text::xid8, %s) ORDER BY xid, id LIMIT 1")


def lag_seconds(conn: Conn, cursor: Cursor) -> float | None:
    """How long the first row beyond `cursor` has waited (None: nothing waits)."""
    row = conn.execute(LAG_SQL, (str(cursor.xid), cursor.id)).fetchone()
    return max(0.0, float(row[0])) if row else None


def pending_count(conn: Conn, cursor: Cursor) -> int:
    """Log rows beyond `cursor` (up to PENDING_COUNT_CAP)."""
    row = conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM lexical_log WHERE (xid, id) > (%s::text::xid8, %s)"
        " LIMIT %s) AS p", (str(cursor.xid), cursor.id, PENDING_COUNT_CAP)).fetchone()
    return int(row[0]) if row else 0


def pending_roots(conn: Conn, cursor: Cursor, namespace: uuid.UUID) -> set[uuid.UUID]:
    """The roots of a namespace beyond `cursor` (verify leaves them aside)."""
    rows = conn.execute(
        "SELECT DISTINCT root_id FROM lexical_log WHERE (xid, id) > (%s::text::xid8, %s)"
        " AND namespace_id = %s", (str(cursor.xid), cursor.id, namespace)).fetchall()
    return {r[0] for r in rows}


def register(conn: Conn, replica: str, host: str, data_dir: str) -> Cursor:
    """Register (or re-register) a replica about to build itself from Postgres: its cursor is
    the horizon now, taken under the log's lock so no prune removes the rows above it. The
    caller builds from snapshots taken after this commits, which hold every transaction below
    the horizon."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOG_LOCK,))
        cursor = Cursor(horizon(conn), 0)
        conn.execute(
            "INSERT INTO lexical_replicas (replica, host, data_dir, cursor_xid, cursor_id)"
            " VALUES (%s, %s, %s, %s::text::xid8, 0) ON CONFLICT (replica) DO UPDATE SET"
            " host = excluded.host, data_dir = excluded.data_dir,"
            " cursor_xid = excluded.cursor_xid, cursor_id = 0, built_at = now(), seen_at = now()",
            (replica, host, data_dir, str(cursor.xid)))
    return cursor


def hold(conn: Conn, name: str, host: str, data_dir: str, cursor: Cursor) -> None:
    """Keep the log beyond `cursor` for a copy of a replica taken at it (a seed for another
    host): a registration of its own, which a prune respects until the seed is adopted or
    REPLICA_TTL_SECONDS pass."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOG_LOCK,))
        conn.execute(
            "INSERT INTO lexical_replicas (replica, host, data_dir, cursor_xid, cursor_id)"
            " VALUES (%s, %s, %s, %s::text::xid8, %s)",
            (name, host, data_dir, str(cursor.xid), cursor.id))


def adopt(conn: Conn, replica: str, host: str, data_dir: str, cursor: Cursor,
          held: str) -> bool:
    """Register `replica` at a seed's `cursor` and let the seed's hold go; False when the hold
    is gone (the seed is older than REPLICA_TTL_SECONDS: the log beyond it may be pruned)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOG_LOCK,))
        if conn.execute("DELETE FROM lexical_replicas WHERE replica = %s",
                        (held,)).rowcount == 0:
            return False
        conn.execute(
            "INSERT INTO lexical_replicas (replica, host, data_dir, cursor_xid, cursor_id)"
            " VALUES (%s, %s, %s, %s::text::xid8, %s) ON CONFLICT (replica) DO UPDATE SET"
            " host = excluded.host, data_dir = excluded.data_dir,"
            " cursor_xid = excluded.cursor_xid, cursor_id = excluded.cursor_id,"
            " built_at = now(), seen_at = now()",
            (replica, host, data_dir, str(cursor.xid), cursor.id))
    return True


def report(conn: Conn, replica: str, cursor: Cursor) -> bool:
    """Record a replica's cursor (after its index and its state file hold it). False when the
    replica is not registered (never, or forgotten after REPLICA_TTL_SECONDS)."""
    return conn.execute(
        "UPDATE lexical_replicas SET cursor_xid = %s::text::xid8, cursor_id = %s,"
        " seen_at = now() WHERE replica = %s", (str(cursor.xid), cursor.id, replica)
    ).rowcount > 0


def registered(conn: Conn, replica: str) -> bool:
    """Whether this replica's registration stands (and its cursor is above the pruned rows)."""
    row = conn.execute(
        "SELECT r.cursor_xid >= p.below FROM lexical_replicas r, lexical_log_pruned p"
        " WHERE r.replica = %s", (replica,)).fetchone()
    return bool(row and row[0])


def pruned_below(conn: Conn) -> int:
    """Log rows of transactions below this were pruned."""
    row = conn.execute("SELECT below::text::bigint FROM lexical_log_pruned").fetchone()
    return int(row[0]) if row else 0


def prune(conn: Conn) -> int:
    """Drop the log rows every live replica has passed (every closed row when no replica is
    live: one that comes later builds itself from Postgres) and forget replicas not seen for
    REPLICA_TTL_SECONDS; how many rows went."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOG_LOCK,))
        conn.execute("DELETE FROM lexical_replicas"
                     " WHERE seen_at < now() - make_interval(secs => %s)",
                     (REPLICA_TTL_SECONDS,))
        row = conn.execute(
            "SELECT cursor_xid::text, cursor_id FROM lexical_replicas"
            " ORDER BY cursor_xid, cursor_id LIMIT 1").fetchone()
        if row is None:  # no replica: every closed transaction's rows
            floor = (str(horizon(conn)), 0)
            gone = conn.execute("DELETE FROM lexical_log WHERE xid < %s::text::xid8",
                                (floor[0],)).rowcount
        else:  # the slowest live replica's cursor, inclusive
            floor = (row[0], int(row[1]))
            gone = conn.execute("DELETE FROM lexical_log WHERE (xid, id) <= (%s::text::xid8, %s)",
                                floor).rowcount
        conn.execute("UPDATE lexical_log_pruned SET below = greatest(below, %s::text::xid8)",
                     (floor[0],))
    return gone


def replicas(conn: Conn) -> list[ReplicaRow]:
    """Every registered replica with its backlog (`status`)."""
    rows = conn.execute(
        "SELECT replica, host, data_dir, cursor_xid::text::bigint, cursor_id, built_at, seen_at"
        " FROM lexical_replicas ORDER BY replica").fetchall()
    out = []
    for r in rows:
        cursor = Cursor(int(r[3]), int(r[4]))
        out.append(ReplicaRow(r[0], r[1], r[2], cursor, r[5], r[6], pending_count(conn, cursor),
                              lag_seconds(conn, cursor) or 0.0))
    return out


def enqueue_all(conn: Conn, namespace: uuid.UUID | None = None) -> int:
    """Log every root (of one namespace, or all) for a re-sync; how many."""
    return conn.execute(
        "INSERT INTO lexical_log (namespace_id, root_id)"
        " SELECT namespace_id, id FROM objects WHERE parent_id IS NULL"
        " AND (%(ns)s::uuid IS NULL OR namespace_id = %(ns)s)", {"ns": namespace}).rowcount


def enqueue_roots(conn: Conn, namespace: uuid.UUID, roots: Sequence[uuid.UUID]) -> None:
    """Log these roots of one namespace for a re-sync (verify's repair)."""
    conn.execute("INSERT INTO lexical_log (namespace_id, root_id)"
                 " SELECT %s, r FROM unnest(%s::uuid[]) AS r", (namespace, list(roots)))


def roots_of(conn: Conn, namespace: uuid.UUID) -> list[uuid.UUID]:
    """Every live root of a namespace, by id."""
    rows = conn.execute("SELECT id FROM objects WHERE namespace_id = %s AND parent_id IS NULL"
                        " AND deleted_at IS NULL ORDER BY id", (namespace,)).fetchall()
    return [r[0] for r in rows]


def namespaces(conn: Conn) -> list[uuid.UUID]:
    """Every namespace holding objects."""
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT namespace_id FROM objects ORDER BY 1").fetchall()]


# The searchable rows of the named live roots: a root's visible parts of its namespace, or the
# root itself when it has none (`brainstream_searchable`, evaluated per root). Per root by index
# (objects_parent), so a plan on stale statistics (a table just loaded) stays linear. The
# namespace tests are written `(...) IS TRUE`, which no index serves: statistics that predate a
# new tenant estimate its namespace at about one row, and the roots were then found by scanning
# the namespace (`objects_ns_doclen`) instead of by id, a scan that grows with the tenant.
_LOAD = """
SELECT x.id, r.id, r.kind, r.title, r.created_at, r.updated_at, r.properties,
       coalesce(x.content, x.summary, x.title, ''),
       (SELECT coalesce(jsonb_object_agg(u.lexeme, coalesce(to_jsonb(u.positions), '[]')),
                        '{}'::jsonb) FROM unnest(x.lexical) AS u)
FROM objects r
CROSS JOIN LATERAL (
    SELECT o.id, o.content, o.summary, o.title, o.lexical FROM objects o
    WHERE o.parent_id = r.id AND (o.namespace_id = r.namespace_id) IS TRUE
      AND o.deleted_at IS NULL
    UNION ALL
    SELECT r.id, r.content, r.summary, r.title, r.lexical
    WHERE NOT EXISTS (SELECT 1 FROM objects c WHERE c.parent_id = r.id
                      AND (c.namespace_id = r.namespace_id) IS TRUE AND c.deleted_at IS NULL)
) AS x
WHERE (r.namespace_id = %(ns)s) IS TRUE AND r.id = ANY(%(roots)s::uuid[])
  AND r.parent_id IS NULL AND r.deleted_at IS NULL
"""


def load_documents(conn: Conn, namespace: uuid.UUID,
                   roots: Sequence[uuid.UUID]) -> list[RowDocument]:
    """The searchable rows of these roots as they are now (none for a deleted or absent root)."""
    rows = conn.execute(_LOAD, {"ns": namespace, "roots": list(roots)}).fetchall()
    return [RowDocument(row_id=r[0], root_id=r[1], kind=r[2], title=r[3], created_at=r[4],
                        updated_at=r[5], properties=r[6] or {}, positions=r[8] or {}, body=r[7])
            for r in rows]


def namespace_counts(conn: Conn) -> dict[uuid.UUID, int]:
    """Searchable rows per namespace, as the index should hold them (verify)."""
    rows = conn.execute(
        "SELECT o.namespace_id, count(*) FROM objects o"
        " WHERE brainstream_searchable(o) GROUP BY o.namespace_id").fetchall()
    return {r[0]: int(r[1]) for r in rows}


def sample_roots(conn: Conn, namespace: uuid.UUID, n: int) -> list[uuid.UUID]:
    """Up to `n` random roots of a namespace, live or not (verify's sampled documents)."""
    rows = conn.execute("SELECT id FROM objects WHERE namespace_id = %s AND parent_id IS NULL"
                        " ORDER BY random() LIMIT %s", (namespace, n)).fetchall()
    return [r[0] for r in rows]
