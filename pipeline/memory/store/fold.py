"""`SummaryWork` on Postgres: the SQL of the session summariser (migrations/0017_memory.sql:
session_summariser, summaries): claim a session with a lease (one summariser at a time per
session), read what a fold takes, write the new summary and move the summary point by compare-
and-set, release the claim.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from pipeline.domain.chunking import count_tokens
from pipeline.domain.memory_model import SUMMARY_BY_SUMMARISER
from pipeline.domain.memory_values import ClaimedSession, ClaimedSummary, FoldInput
from pipeline.domain.retry import retry_transient

_CLAIM = """
UPDATE session_summariser s SET lease_until = now() + make_interval(secs => %(lease)s),
       updated_at = now()
FROM (SELECT session_pk FROM session_summariser
      WHERE pending AND (lease_until IS NULL OR lease_until < now())
        AND (%(sessions)s::uuid[] IS NULL OR session_pk = ANY(%(sessions)s::uuid[]))
      ORDER BY requested_at, session_pk
      LIMIT %(limit)s
      FOR UPDATE SKIP LOCKED) c
WHERE s.session_pk = c.session_pk
RETURNING s.session_pk, s.namespace_id, s.requests, s.lease_until
"""


class PgSummaryWork:
    """`SummaryWork` on Postgres (a sync pool: the workers')."""

    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool

    def claim_sessions(self, sessions: Sequence[uuid.UUID] | None, *, lease: float,
                       limit: int) -> list[ClaimedSession]:
        """Pending sessions (of `sessions`, or any) nobody summarises now, leased to the
        caller."""
        with self.pool.connection() as conn:
            rows = conn.execute(_CLAIM, {
                "lease": lease, "limit": limit,
                "sessions": list(sessions) if sessions is not None else None}).fetchall()
        return [ClaimedSession(*row) for row in rows]

    def session_point(self, session_pk: uuid.UUID) -> tuple[int, int] | None:
        """(last_seq, summary_seq) of a live session; None when it is deleted or gone."""
        with self.pool.connection() as conn:
            row = conn.execute("SELECT last_seq, summary_seq FROM sessions WHERE id = %s"
                               " AND deleted_at IS NULL", (session_pk,)).fetchone()
        return (int(row[0]), int(row[1])) if row else None

    def fold_input(self, session_pk: uuid.UUID, count: int) -> FoldInput | None:
        """The oldest `count` seqs after the point and the summary they fold into."""
        with self.pool.connection() as conn:
            head = conn.execute(
                "SELECT s.last_seq, s.summary_seq, m.content FROM sessions s"
                " LEFT JOIN summaries m ON m.namespace_id = s.namespace_id"
                "   AND m.uuid = s.summary_uuid"
                " WHERE s.id = %s AND s.deleted_at IS NULL", (session_pk,)).fetchone()
            if head is None:
                return None
            summary_seq = int(head[1])
            rows = conn.execute(
                "SELECT uuid, seq, role, content FROM messages WHERE session_pk = %s"
                " AND seq > %s AND seq <= %s AND deleted_at IS NULL ORDER BY seq",
                (session_pk, summary_seq, summary_seq + count)).fetchall()
        return FoldInput(int(head[0]), summary_seq, head[2],
                         [(r[0], int(r[1]), str(r[2]), str(r[3])) for r in rows])

    def move_point(self, claim: ClaimedSession, *, from_seq: int, to_seq: int,
                   recent_uuid: uuid.UUID, content: str | None, vector: Any) -> bool:
        """One transaction: write the summary (None: chatter alone before any summary, only
        the point moves) and move the point from `from_seq` to `to_seq`, only while the claim
        holds and nobody moved the point meanwhile (an external summary.put, say). False when
        it did not hold. A deadlock or serialization failure is retried: the result is in
        hand, and the statements are idempotent."""
        def once() -> bool:
            with self.pool.connection() as conn, conn.transaction():
                return _move_point(conn, claim, from_seq, to_seq, recent_uuid, content, vector)

        return retry_transient(once, attempts=5, max_wait=2.0,
                               transient=(psycopg.errors.TransactionRollback,))

    def release(self, claim: ClaimedSession, *, error: str | None = None,
                keep_pending: bool = False) -> bool:
        """End the claim: the row stops being pending unless a messages.add asked again since
        the claim (then it stays pending for the next run) or `keep_pending`; with `error`, the
        reason is kept and counts as an attempt. True when the row is still pending."""
        with self.pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "UPDATE session_summariser SET lease_until = NULL, updated_at = now(),"
                " pending = (%(keep)s OR requests <> %(requests)s), error = %(error)s,"
                " attempts = CASE WHEN %(error)s::text IS NULL THEN 0 ELSE attempts + 1 END"
                " WHERE session_pk = %(pk)s AND lease_until = %(lease)s RETURNING pending",
                {"requests": claim.requests, "error": error, "pk": claim.session_pk,
                 "lease": claim.lease, "keep": keep_pending}).fetchone()
        return bool(row and row[0])

    def claim_summary_embeddings(self, sessions: Sequence[uuid.UUID] | None, *, lease: float,
                                 limit: int) -> list[ClaimedSummary]:
        """Summaries waiting for their vector (an external summary.put; a fold whose embedder
        was down), leased."""
        with self.pool.connection() as conn:
            rows = conn.execute(_CLAIM_SUMMARIES, {
                "lease": lease, "limit": limit,
                "sessions": list(sessions) if sessions is not None else None}).fetchall()
        return [ClaimedSummary(r[0], r[1], str(r[2]), r[3]) for r in rows]

    def store_summary_embeddings(self, rows: Sequence[tuple[ClaimedSummary, Any]]) -> int:
        """Write vectors where the claim holds and the content is the one embedded."""
        stored = 0
        with self.pool.connection() as conn, conn.transaction():
            for claimed, vector in rows:
                stored += conn.execute(
                    "UPDATE summaries SET embedding = %s, embed_status = 'done',"
                    " embed_lease_until = NULL, embed_error = NULL, updated_at = now()"
                    " WHERE namespace_id = %s AND uuid = %s AND content = %s"
                    " AND embed_lease_until = %s AND embed_status = 'pending'",
                    (vector, claimed.namespace_id, claimed.summary_uuid, claimed.content,
                     claimed.lease)).rowcount
        return stored


_CLAIM_SUMMARIES = """
UPDATE summaries s SET embed_lease_until = now() + make_interval(secs => %(lease)s)
FROM (SELECT namespace_id, uuid FROM summaries WHERE embed_status = 'pending'
        AND deleted_at IS NULL AND (embed_lease_until IS NULL OR embed_lease_until < now())
        AND (%(sessions)s::uuid[] IS NULL OR session_pk = ANY(%(sessions)s::uuid[]))
      ORDER BY updated_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED) c
WHERE s.namespace_id = c.namespace_id AND s.uuid = c.uuid
RETURNING s.namespace_id, s.uuid, s.content, s.embed_lease_until
"""


def summary_uuid(session_pk: uuid.UUID, recent_seq: int) -> uuid.UUID:
    """The summary folding a session up to `recent_seq`: one id, so a fold redone after a kill
    writes the same row, never a second one."""
    return uuid.uuid5(session_pk, json.dumps(["brainstream.summary", recent_seq]))


def _move_point(conn: psycopg.Connection[Any], claim: ClaimedSession, from_seq: int,
                to_seq: int, recent_uuid: uuid.UUID, content: str | None, vector: Any) -> bool:
    # The session row first, as the write path locks it (messages.add locks the session, then
    # requests the summariser): the other order deadlocked against the consumer. The point's
    # compare-and-set is decided under this lock; the lease check only spares a stale worker.
    point = conn.execute("SELECT summary_seq FROM sessions WHERE id = %s AND deleted_at IS NULL"
                         " FOR UPDATE", (claim.session_pk,)).fetchone()
    if point is None or int(point[0]) != from_seq:
        return False
    held = conn.execute("SELECT 1 FROM session_summariser WHERE session_pk = %s"
                        " AND lease_until = %s", (claim.session_pk, claim.lease)).fetchone()
    if held is None:
        return False
    moved_uuid: uuid.UUID | None = None
    if content is not None:
        moved_uuid = summary_uuid(claim.session_pk, to_seq)
        conn.execute(
            "INSERT INTO summaries (namespace_id, uuid, session_pk, content, recent_message_uuid,"
            " recent_seq, token_count, embedding, embed_status, source)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s,"
            " CASE WHEN %s::boolean THEN 'done' ELSE 'pending' END, %s)"
            " ON CONFLICT (namespace_id, uuid) DO NOTHING",
            (claim.namespace_id, moved_uuid, claim.session_pk, content, recent_uuid, to_seq,
             count_tokens(content), vector, vector is not None, SUMMARY_BY_SUMMARISER))
    conn.execute("UPDATE sessions SET summary_seq = %s, summary_uuid = coalesce(%s, summary_uuid),"
                 " updated_at = now() WHERE id = %s", (to_seq, moved_uuid, claim.session_pk))
    return True
