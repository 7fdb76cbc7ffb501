"""Operations on conversation memory (issue 12, item 5): purge what was soft-deleted past the
retention, verify the memory tables (counts per namespace, messages whose extractors are still
pending or failed, broken invariants), and the backlog counts `status` and the metrics exporter
show (extractor lag, summary lag). Tables: migrations/0017_memory.sql.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg

from pipeline.domain.memory_model import MESSAGE_EXTRACTORS
from pipeline.settings import Settings

Conn = psycopg.Connection[Any]


@dataclass
class MemoryPurge:
    sessions: int = 0
    messages: int = 0
    summaries: int = 0


def purge_memory(settings: Settings, older_than: timedelta | None = None, *,
                 batch: int = 500) -> MemoryPurge:
    """Hard-delete sessions soft-deleted longer than `older_than` (default: the retention
    setting) with their messages, summaries and work state, and the messages and summaries
    hidden by a delete of a session that was revived since. The event ledger stays, so a
    replayed old event about a purged session is still recognised as applied."""
    age = older_than if older_than is not None else timedelta(
        days=settings.memory_retention_days)
    seconds = age.total_seconds()
    result = MemoryPurge()
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        while True:
            with conn.transaction():
                ids = [r[0] for r in conn.execute(
                    "SELECT id FROM sessions WHERE deleted_at < now() - make_interval(secs => %s)"
                    " ORDER BY deleted_at LIMIT %s FOR UPDATE SKIP LOCKED",
                    (seconds, batch)).fetchall()]
                if not ids:
                    break
                result.messages += _count(conn, "messages", ids)
                result.summaries += _count(conn, "summaries", ids)
                # messages, their extractor rows, summaries and summariser state cascade
                result.sessions += conn.execute("DELETE FROM sessions WHERE id = ANY(%s)",
                                                (ids,)).rowcount
        for table in ("messages", "summaries"):
            deleted = conn.execute(
                f"DELETE FROM {table} WHERE deleted_at < now() - make_interval(secs => %s)",
                (seconds,)).rowcount
            if table == "messages":
                result.messages += deleted
            else:
                result.summaries += deleted
    return result


def _count(conn: Conn, table: str, ids: list[Any]) -> int:
    row = conn.execute(f"SELECT count(*) FROM {table} WHERE session_pk = ANY(%s)",
                       (ids,)).fetchone()
    return int(row[0]) if row else 0


@dataclass
class NamespaceMemory:
    """One namespace's memory, as `verify` counts it."""

    namespace: str
    sessions: int
    deleted_sessions: int
    messages: int
    hidden_messages: int
    summaries: int
    pending_messages: int  # visible messages with an extractor still pending
    failed_messages: int   # ... with an extractor that gave up


@dataclass
class MemoryCheck:
    namespaces: list[NamespaceMemory] = field(default_factory=list)
    # broken invariants (each should be 0): a message without its extractor rows, a session
    # with a message past its last_seq (the next add would collide; purged hidden messages
    # leave gaps below it, which are fine), a summary point naming no summary
    missing_extractor_rows: int = 0
    seq_mismatches: int = 0
    dangling_summary_points: int = 0
    # an extractor row done whose result the message lacks (no token count; no vector: not
    # found by dense search; no `system.entities`)
    missing_results: int = 0

    @property
    def clean(self) -> bool:
        return not (self.missing_extractor_rows or self.seq_mismatches
                    or self.dangling_summary_points or self.missing_results)


def verify_memory(settings: Settings) -> MemoryCheck:
    """Counts per namespace and the invariants of the memory tables."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        return check_memory(conn)


# What each extractor's `done` promises the message holds (pipeline/memory/store/work.py).
_MISSING_RESULTS = (
    "SELECT count(*) FROM message_extraction e JOIN messages m"
    " ON m.namespace_id = e.namespace_id AND m.uuid = e.message_uuid"
    " WHERE e.status = 'done' AND CASE e.extractor"
    "  WHEN 'token' THEN m.token_count IS NULL"
    "  WHEN 'embed' THEN m.embedding IS NULL"
    "  WHEN 'entities' THEN NOT coalesce(m.metadata -> 'system' ? 'entities', false)"
    "  ELSE false END")


def check_memory(conn: Conn) -> MemoryCheck:
    """`verify_memory` on a connection (what it sees, in its transaction)."""
    check = MemoryCheck()
    rows = conn.execute(
        "WITH s AS (SELECT namespace_id, count(*) FILTER (WHERE deleted_at IS NULL) AS live,"
        "  count(*) FILTER (WHERE deleted_at IS NOT NULL) AS gone FROM sessions"
        "  GROUP BY namespace_id),"
        " m AS (SELECT namespace_id, count(*) FILTER (WHERE deleted_at IS NULL) AS live,"
        "  count(*) FILTER (WHERE deleted_at IS NOT NULL) AS hidden FROM messages"
        "  GROUP BY namespace_id),"
        " su AS (SELECT namespace_id, count(*) AS n FROM summaries WHERE deleted_at IS NULL"
        "  GROUP BY namespace_id),"
        " x AS (SELECT e.namespace_id,"
        "  count(DISTINCT e.message_uuid) FILTER (WHERE e.status = 'pending') AS pending,"
        "  count(DISTINCT e.message_uuid) FILTER (WHERE e.status = 'failed') AS failed"
        "  FROM message_extraction e JOIN messages m ON m.namespace_id = e.namespace_id"
        "  AND m.uuid = e.message_uuid AND m.deleted_at IS NULL GROUP BY e.namespace_id)"
        " SELECT s.namespace_id::text, s.live, s.gone, coalesce(m.live, 0),"
        "  coalesce(m.hidden, 0), coalesce(su.n, 0), coalesce(x.pending, 0),"
        "  coalesce(x.failed, 0)"
        " FROM s LEFT JOIN m USING (namespace_id) LEFT JOIN su USING (namespace_id)"
        " LEFT JOIN x USING (namespace_id) ORDER BY 1").fetchall()
    check.namespaces = [NamespaceMemory(*(r[0], *(int(v) for v in r[1:]))) for r in rows]
    check.missing_extractor_rows = _scalar(conn, (
        "SELECT count(*) FROM messages m CROSS JOIN unnest(%s::text[]) AS x(extractor)"
        " WHERE NOT EXISTS (SELECT 1 FROM message_extraction e WHERE e.namespace_id ="
        " m.namespace_id AND e.message_uuid = m.uuid AND e.extractor = x.extractor)"),
        (list(MESSAGE_EXTRACTORS),))
    check.missing_results = _scalar(conn, _MISSING_RESULTS, ())
    check.seq_mismatches = _scalar(conn, (
        "SELECT count(*) FROM sessions s WHERE s.last_seq < coalesce("
        "(SELECT max(seq) FROM messages m WHERE m.session_pk = s.id), 0)"), ())
    check.dangling_summary_points = _scalar(conn, (
        "SELECT count(*) FROM sessions s WHERE s.summary_uuid IS NOT NULL AND NOT EXISTS"
        " (SELECT 1 FROM summaries u WHERE u.namespace_id = s.namespace_id"
        " AND u.uuid = s.summary_uuid)"), ())
    return check


def _scalar(conn: Conn, query: str, params: tuple[Any, ...]) -> int:
    row = conn.execute(query, params).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


@dataclass(frozen=True)
class ExtractorBacklog:
    extractor: str
    pending: int
    failed: int
    oldest_pending_seconds: float


@dataclass(frozen=True)
class MemoryBacklog:
    """What `status` and the exporter show: each extractor's backlog and lag, and the
    summariser's (sessions waiting for it, and messages past the window not folded yet)."""

    extractors: list[ExtractorBacklog]
    summariser_pending: int
    summariser_oldest_seconds: float
    summary_lag_messages: int  # over every live session: messages past its window
    summary_lag_max: int       # the worst session's


# Served by migration 0024's index on (last_seq - summary_seq): the sessions past the window only.
SUMMARY_LAG = (
    "SELECT coalesce(sum((last_seq - summary_seq) - %(w)s), 0),"
    " coalesce(max((last_seq - summary_seq) - %(w)s), 0) FROM sessions"
    " WHERE deleted_at IS NULL AND (last_seq - summary_seq) > %(w)s")


def read_memory_backlog(conn: Conn, window: int) -> MemoryBacklog:
    """The memory backlog, each count from an index that holds only its backlog: pending and
    failed extractor rows, pending summariser rows, sessions past the window."""
    # pending and failed rows separately: each count walks its own partial index
    pending = {r[0]: (int(r[1]), float(r[2])) for r in conn.execute(
        "SELECT extractor, count(*), extract(epoch FROM now() - min(created_at))::float8"
        " FROM message_extraction WHERE status = 'pending' GROUP BY extractor").fetchall()}
    failed = {r[0]: int(r[1]) for r in conn.execute(
        "SELECT extractor, count(*) FROM message_extraction WHERE status = 'failed'"
        " GROUP BY extractor").fetchall()}
    extractors = [ExtractorBacklog(name, pending.get(name, (0, 0.0))[0], failed.get(name, 0),
                                   pending.get(name, (0, 0.0))[1])
                  for name in MESSAGE_EXTRACTORS]
    summariser = conn.execute(
        "SELECT count(*), coalesce(extract(epoch FROM now() - min(requested_at)), 0)::float8"
        " FROM session_summariser WHERE pending").fetchone()
    lag = conn.execute(SUMMARY_LAG, {"w": window}).fetchone()
    return MemoryBacklog(extractors, int(summariser[0]) if summariser else 0,
                         float(summariser[1]) if summariser else 0.0,
                         int(lag[0]) if lag else 0, int(lag[1]) if lag else 0)
