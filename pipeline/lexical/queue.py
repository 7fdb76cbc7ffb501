"""The lexical index's SQL: its queue (`lexical_queue`, filled by triggers on `objects`,
migrations/0026) and the current state of the roots it names.

A queued row names a root; the writer re-reads the root's searchable rows (its visible parts, or
the root itself while it has none) with what filters judge (the root's kind, title, times and
properties) and the lexemes of each row's `lexical` tsvector, at their positions.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

import psycopg

from pipeline.lexical.documents import RowDocument

Conn = psycopg.Connection[Any]


class Queued(NamedTuple):
    """One queue row: re-sync this root of this namespace."""

    id: int
    namespace_id: uuid.UUID
    root_id: uuid.UUID


def claim(conn: Conn, limit: int) -> list[Queued]:
    """The oldest queue rows. Not locked: one writer runs at a time (an advisory lock)."""
    rows = conn.execute("SELECT id, namespace_id, root_id FROM lexical_queue ORDER BY id LIMIT %s",
                        (limit,)).fetchall()
    return [Queued(*r) for r in rows]


def forget(conn: Conn, ids: Sequence[int]) -> None:
    """The rows were applied and committed to the index."""
    conn.execute("DELETE FROM lexical_queue WHERE id = ANY(%s)", (list(ids),))


def max_id(conn: Conn) -> int:
    """The newest queue row's id (0 when empty)."""
    row = conn.execute("SELECT coalesce(max(id), 0) FROM lexical_queue").fetchone()
    return int(row[0]) if row else 0


def forget_up_to(conn: Conn, last_id: int) -> None:
    """Drop the queue rows up to `last_id` (a rebuild that read the rows after them covered
    them)."""
    conn.execute("DELETE FROM lexical_queue WHERE id <= %s", (last_id,))


def queued_roots(conn: Conn, namespace: uuid.UUID) -> set[uuid.UUID]:
    """The roots of a namespace waiting in the queue (verify leaves them aside)."""
    rows = conn.execute("SELECT DISTINCT root_id FROM lexical_queue WHERE namespace_id = %s",
                        (namespace,)).fetchall()
    return {r[0] for r in rows}


def roots_of(conn: Conn, namespace: uuid.UUID) -> list[uuid.UUID]:
    """Every live root of a namespace, by id."""
    rows = conn.execute("SELECT id FROM objects WHERE namespace_id = %s AND parent_id IS NULL"
                        " AND deleted_at IS NULL ORDER BY id", (namespace,)).fetchall()
    return [r[0] for r in rows]


def namespaces(conn: Conn) -> list[uuid.UUID]:
    """Every namespace holding objects."""
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT namespace_id FROM objects ORDER BY 1").fetchall()]


def backlog(conn: Conn) -> int:
    """Queue rows not yet applied."""
    row = conn.execute("SELECT count(*) FROM lexical_queue").fetchone()
    return int(row[0]) if row else 0


def enqueue_all(conn: Conn, namespace: uuid.UUID | None = None) -> int:
    """Queue every root (of one namespace, or all) for a re-sync; how many."""
    return conn.execute(
        "INSERT INTO lexical_queue (namespace_id, root_id)"
        " SELECT namespace_id, id FROM objects WHERE parent_id IS NULL"
        " AND (%(ns)s::uuid IS NULL OR namespace_id = %(ns)s)", {"ns": namespace}).rowcount


def enqueue_roots(conn: Conn, namespace: uuid.UUID, roots: Sequence[uuid.UUID]) -> None:
    """Queue these roots of one namespace (verify's repair)."""
    conn.execute("INSERT INTO lexical_queue (namespace_id, root_id)"
                 " SELECT %s, r FROM unnest(%s::uuid[]) AS r", (namespace, list(roots)))


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
