"""Reads of conversation memory for the API (migrations/0017_memory.sql): a session, a user's
sessions, a session's memory (latest summary and messages), its messages by page, and how many
of some messages are stored (the write-through's wait).

Only live sessions and visible messages of the caller's namespace are read: another tenant's
session, a deleted one and an unknown one all look the same (absent). Every query walks an
index: the session by (namespace_id, session_id), messages by (session_pk, seq) backwards or
forwards, a summary by its key; none scans a session's messages.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from pipeline.domain.memory_model import Memory, Message, Session, Summary, summary_lag
from pipeline.postgres.pool import AsyncConn, read_connection

# a session's columns are named apart from a message's (the memory statement reads both)
_SESSION = ("SELECT id, session_id, user_id, metadata AS session_metadata,"
            " created_at AS s_created, updated_at AS s_updated, last_seq, summary_seq,"
            " summary_uuid FROM sessions")
_MESSAGE = ("SELECT uuid, seq, role, content, metadata, token_count, created_at FROM messages"
            " WHERE session_pk = %(key)s AND deleted_at IS NULL")

# GET memory: the live session, its latest summary, and its newest messages (after the summary
# point, or the last `lastn`), newest first; one row per message, or one without a message.
_MEMORY = """
SELECT s.id, s.session_id, s.user_id, s.metadata AS session_metadata, s.created_at AS s_created,
       s.updated_at AS s_updated, s.last_seq, s.summary_seq,
       u.uuid AS s_uuid, u.content AS s_content, u.recent_message_uuid AS s_recent,
       u.recent_seq AS s_recent_seq, u.token_count AS s_tokens, u.source AS s_source,
       u.created_at AS s_created_at,
       m.uuid, m.seq, m.role, m.content, m.metadata, m.token_count, m.created_at
FROM sessions s
LEFT JOIN summaries u ON u.namespace_id = s.namespace_id AND u.uuid = s.summary_uuid
    AND u.deleted_at IS NULL
LEFT JOIN LATERAL (
    SELECT uuid, seq, role, content, metadata, token_count, created_at FROM messages
    WHERE session_pk = s.id AND deleted_at IS NULL
      AND seq > CASE WHEN %(lastn)s::int IS NULL THEN s.summary_seq ELSE 0 END
    ORDER BY seq DESC LIMIT %(n)s
) m ON true
WHERE s.namespace_id = %(ns)s AND s.session_id = %(sid)s AND s.deleted_at IS NULL
ORDER BY m.seq DESC
"""


def _session(row: dict[str, Any]) -> Session:
    return Session(session_id=row["session_id"], user_id=row["user_id"],
                   metadata=dict(row["session_metadata"]), created_at=row["s_created"],
                   updated_at=row["s_updated"], last_seq=row["last_seq"],
                   summary_seq=row["summary_seq"])


def _message(row: dict[str, Any]) -> Message:
    return Message(uuid=row["uuid"], seq=row["seq"], role=row["role"], content=row["content"],
                   metadata=dict(row["metadata"]), token_count=row["token_count"],
                   created_at=row["created_at"])


class PgMemoryReader:
    """Conversation memory of one namespace at a time, on the read pool."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn]) -> None:
        self.pool = pool

    async def _live(self, conn: AsyncConn, ns: uuid.UUID, session_id: str
                    ) -> dict[str, Any] | None:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(_SESSION + " WHERE namespace_id = %s AND session_id = %s"
                          " AND deleted_at IS NULL", (ns, session_id))
        return await cur.fetchone()

    async def session(self, ns: uuid.UUID, session_id: str) -> Session | None:
        """A live session of the namespace."""
        async with read_connection(self.pool) as conn:
            row = await self._live(conn, ns, session_id)
        return _session(row) if row else None

    async def deleted(self, ns: uuid.UUID, session_id: str) -> bool:
        """Whether the namespace holds this session soft-deleted."""
        async with read_connection(self.pool) as conn:
            cur = await conn.execute(
                "SELECT deleted_at IS NOT NULL FROM sessions WHERE namespace_id = %s"
                " AND session_id = %s", (ns, session_id))
            row = await cur.fetchone()
        return bool(row and row[0])

    async def sessions(self, ns: uuid.UUID, user_id: str | None, after: str | None,
                       limit: int) -> list[Session]:
        """Live sessions (of one user, if given) by session id, after `after`; up to `limit`."""
        async with read_connection(self.pool) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                _SESSION + " WHERE namespace_id = %(ns)s AND deleted_at IS NULL"
                " AND (%(user)s::text IS NULL OR user_id = %(user)s)"
                " AND (%(after)s::text IS NULL OR session_id > %(after)s)"
                " ORDER BY session_id LIMIT %(limit)s",
                {"ns": ns, "user": user_id, "after": after, "limit": limit})
            return [_session(row) for row in await cur.fetchall()]

    async def memory(self, ns: uuid.UUID, session_id: str, *, lastn: int | None,
                     window: int) -> Memory | None:
        """The latest summary and, oldest first, the last `lastn` visible messages, or without
        `lastn` the messages after the summary point, at most `window` (the newest). One
        statement (one round trip): the session, its summary and the messages side by side."""
        async with read_connection(self.pool) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(_MEMORY, {"ns": ns, "sid": session_id, "lastn": lastn,
                                        "n": lastn if lastn is not None else window})
            rows = await cur.fetchall()
        if not rows:
            return None
        head = rows[0]
        summary = None
        if head["s_uuid"] is not None:
            summary = Summary(uuid=head["s_uuid"], content=head["s_content"],
                              recent_message_uuid=head["s_recent"],
                              recent_seq=head["s_recent_seq"], token_count=head["s_tokens"],
                              source=head["s_source"], created_at=head["s_created_at"])
        messages = [_message(r) for r in reversed(rows) if r["uuid"] is not None]
        return Memory(session=_session(head), summary=summary, messages=messages,
                      summary_lag=summary_lag(head["last_seq"], head["summary_seq"], window))

    async def messages(self, ns: uuid.UUID, session_id: str, *, after_seq: int,
                       limit: int) -> list[Message] | None:
        """Visible messages with seq > `after_seq`, by seq, up to `limit` (None: no session)."""
        async with read_connection(self.pool) as conn:
            row = await self._live(conn, ns, session_id)
            if row is None:
                return None
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(_MESSAGE + " AND seq > %(after)s ORDER BY seq LIMIT %(n)s",
                              {"key": row["id"], "after": after_seq, "n": limit})
            return [_message(r) for r in await cur.fetchall()]

    async def stored(self, ns: uuid.UUID, session_key: uuid.UUID,
                     uuids: Sequence[uuid.UUID]) -> list[Message]:
        """Which of these messages the session holds (visible), by seq."""
        async with read_connection(self.pool) as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(_MESSAGE + " AND namespace_id = %(ns)s AND uuid = ANY(%(uuids)s)"
                              " ORDER BY seq", {"key": session_key, "ns": ns,
                                                "uuids": list(uuids)})
            return [_message(r) for r in await cur.fetchall()]
