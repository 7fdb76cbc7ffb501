"""The SQL of the session summariser (migrations/0017_memory.sql: session_summariser, summaries):
claim a session with a lease (one summariser at a time per session), read what a fold takes,
write the new summary and move the summary point by compare-and-set, release the claim.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from pipeline.domain.chunking import count_tokens
from pipeline.memory.model import SUMMARY_BY_SUMMARISER

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


@dataclass(frozen=True)
class ClaimedSession:
    """A session claimed for summarising; `lease` is the claim's token, `requests` the request
    count seen at the claim (a later messages.add raises it and keeps the row pending)."""

    session_pk: uuid.UUID
    namespace_id: uuid.UUID
    requests: int
    lease: datetime


@dataclass(frozen=True)
class FoldInput:
    """The session's point, its previous summary and the messages a fold takes (by seq)."""

    last_seq: int
    summary_seq: int
    previous: str | None
    messages: list[tuple[uuid.UUID, int, str, str]]  # (uuid, seq, role, content)


def claim_sessions(conn: psycopg.Connection[Any], sessions: Sequence[uuid.UUID] | None, *,
                   lease: float, limit: int) -> list[ClaimedSession]:
    """Pending sessions (of `sessions`, or any) nobody summarises now, leased to the caller."""
    rows = conn.execute(_CLAIM, {"lease": lease, "limit": limit,
                                 "sessions": list(sessions) if sessions is not None else None}
                        ).fetchall()
    return [ClaimedSession(*row) for row in rows]


def session_point(conn: psycopg.Connection[Any], session_pk: uuid.UUID
                  ) -> tuple[int, int] | None:
    """(last_seq, summary_seq) of a live session; None when it is deleted or gone."""
    row = conn.execute("SELECT last_seq, summary_seq FROM sessions WHERE id = %s"
                       " AND deleted_at IS NULL", (session_pk,)).fetchone()
    return (int(row[0]), int(row[1])) if row else None


def fold_input(conn: psycopg.Connection[Any], session_pk: uuid.UUID, count: int
               ) -> FoldInput | None:
    """The oldest `count` seqs after the point (hidden messages take their seq, not a place in
    the summary) and the summary they fold into."""
    head = conn.execute(
        "SELECT s.last_seq, s.summary_seq, m.content FROM sessions s"
        " LEFT JOIN summaries m ON m.namespace_id = s.namespace_id AND m.uuid = s.summary_uuid"
        " WHERE s.id = %s AND s.deleted_at IS NULL", (session_pk,)).fetchone()
    if head is None:
        return None
    last_seq, summary_seq, previous = int(head[0]), int(head[1]), head[2]
    rows = conn.execute(
        "SELECT uuid, seq, role, content FROM messages WHERE session_pk = %s"
        " AND seq > %s AND seq <= %s AND deleted_at IS NULL ORDER BY seq",
        (session_pk, summary_seq, summary_seq + count)).fetchall()
    return FoldInput(last_seq, summary_seq, previous,
                     [(r[0], int(r[1]), str(r[2]), str(r[3])) for r in rows])


def summary_uuid(session_pk: uuid.UUID, recent_seq: int) -> uuid.UUID:
    """The summary folding a session up to `recent_seq`: one id, so a fold redone after a kill
    writes the same row, never a second one."""
    return uuid.uuid5(session_pk, json.dumps(["brainstream.summary", recent_seq]))


def move_point(conn: psycopg.Connection[Any], claim: ClaimedSession, *, from_seq: int,
               to_seq: int, recent_uuid: uuid.UUID | None, content: str | None,
               vector: Any) -> bool:
    """In the caller's transaction: write the summary (None: the folded messages were all
    chatter, the point moves and the previous summary stays) and move the point from `from_seq`
    to `to_seq`, only while the claim holds and nobody moved the point meanwhile (an external
    summary.put, say). False when it did not hold."""
    held = conn.execute(
        "SELECT 1 FROM session_summariser WHERE session_pk = %s AND lease_until = %s"
        " FOR UPDATE", (claim.session_pk, claim.lease)).fetchone()
    if held is None:
        return False
    moved_uuid: uuid.UUID | None = None
    if content is not None and recent_uuid is not None:
        moved_uuid = summary_uuid(claim.session_pk, to_seq)
        conn.execute(
            "INSERT INTO summaries (namespace_id, uuid, session_pk, content, recent_message_uuid,"
            " recent_seq, token_count, embedding, embed_status, source)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s,"
            " CASE WHEN %s::vector IS NULL THEN 'pending' ELSE 'done' END, %s)"
            " ON CONFLICT (namespace_id, uuid) DO NOTHING",
            (claim.namespace_id, moved_uuid, claim.session_pk, content, recent_uuid, to_seq,
             count_tokens(content), vector, vector, SUMMARY_BY_SUMMARISER))
    updated = conn.execute(
        "UPDATE sessions SET summary_seq = %s, summary_uuid = coalesce(%s, summary_uuid),"
        " updated_at = now() WHERE id = %s AND summary_seq = %s AND deleted_at IS NULL",
        (to_seq, moved_uuid, claim.session_pk, from_seq)).rowcount
    return updated == 1


def release(conn: psycopg.Connection[Any], claim: ClaimedSession, *,
            error: str | None = None) -> bool:
    """End the claim: the row stops being pending unless a messages.add asked again since the
    claim (then it stays pending for the next run); with `error`, the reason is kept and counts
    as an attempt. True when the row is still pending."""
    row = conn.execute(
        "UPDATE session_summariser SET lease_until = NULL, updated_at = now(),"
        " pending = (requests <> %(requests)s), error = %(error)s,"
        " attempts = CASE WHEN %(error)s::text IS NULL THEN 0 ELSE attempts + 1 END"
        " WHERE session_pk = %(pk)s AND lease_until = %(lease)s RETURNING pending",
        {"requests": claim.requests, "error": error, "pk": claim.session_pk,
         "lease": claim.lease}).fetchone()
    return bool(row and row[0])


def claim_summary_embeddings(conn: psycopg.Connection[Any],
                             sessions: Sequence[uuid.UUID] | None, *, lease: float,
                             limit: int) -> list[tuple[uuid.UUID, uuid.UUID, str, datetime]]:
    """Summaries waiting for their vector (an external summary.put; a fold whose embedder was
    down), leased: (namespace, uuid, content, lease stamp)."""
    rows = conn.execute(
        "UPDATE summaries s SET embed_lease_until = now() + make_interval(secs => %(lease)s)"
        " FROM (SELECT namespace_id, uuid FROM summaries WHERE embed_status = 'pending'"
        "   AND deleted_at IS NULL AND (embed_lease_until IS NULL OR embed_lease_until < now())"
        "   AND (%(sessions)s::uuid[] IS NULL OR session_pk = ANY(%(sessions)s::uuid[]))"
        "   ORDER BY updated_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED) c"
        " WHERE s.namespace_id = c.namespace_id AND s.uuid = c.uuid"
        " RETURNING s.namespace_id, s.uuid, s.content, s.embed_lease_until",
        {"lease": lease, "limit": limit,
         "sessions": list(sessions) if sessions is not None else None}).fetchall()
    return [(r[0], r[1], str(r[2]), r[3]) for r in rows]


def store_summary_embedding(conn: psycopg.Connection[Any], namespace_id: uuid.UUID,
                            summary: uuid.UUID, content: str, lease: datetime,
                            vector: Any) -> bool:
    """Write a summary's vector while the claim holds and its content is the one embedded."""
    return conn.execute(
        "UPDATE summaries SET embedding = %s, embed_status = 'done', embed_lease_until = NULL,"
        " embed_error = NULL, updated_at = now() WHERE namespace_id = %s AND uuid = %s"
        " AND content = %s AND embed_lease_until = %s AND embed_status = 'pending'",
        (vector, namespace_id, summary, content, lease)).rowcount == 1


def summariser_backlog(conn: psycopg.Connection[Any], window: int) -> dict[str, Any]:
    """Sessions waiting for the summariser, failed ones, and the largest debt past the window
    (for status and metrics)."""
    row = conn.execute(
        "SELECT count(*) FILTER (WHERE w.pending), count(*) FILTER (WHERE w.error IS NOT NULL),"
        " coalesce(max(greatest(0, s.last_seq - s.summary_seq - %s)), 0),"
        " extract(epoch FROM now() - min(w.requested_at) FILTER (WHERE w.pending))"
        " FROM session_summariser w JOIN sessions s ON s.id = w.session_pk"
        " WHERE s.deleted_at IS NULL", (window,)).fetchone()
    pending, failed, debt, oldest = row if row else (0, 0, 0, None)
    return {"pending_sessions": int(pending or 0), "failed_sessions": int(failed or 0),
            "max_messages_past_window": int(debt or 0),
            "oldest_pending_seconds": round(float(oldest), 1) if oldest is not None else None}
