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

from pipeline.memory.model import Memory, Message, Session, Summary, summary_lag
from pipeline.stores.postgres.pool import AsyncConn, read_connection

_SESSION = ("SELECT id, session_id, user_id, metadata, created_at, updated_at, last_seq,"
            " summary_seq, summary_uuid FROM sessions")
_MESSAGE = ("SELECT uuid, seq, role, content, metadata, token_count, created_at FROM messages"
            " WHERE session_pk = %(key)s AND deleted_at IS NULL")


def _session(row: dict[str, Any]) -> Session:
    return Session(session_id=row["session_id"], user_id=row["user_id"],
                   metadata=dict(row["metadata"]), created_at=row["created_at"],
                   updated_at=row["updated_at"], last_seq=row["last_seq"],
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
        `lastn` the messages after the summary point, at most `window` (the newest)."""
        async with read_connection(self.pool) as conn:
            row = await self._live(conn, ns, session_id)
            if row is None:
                return None
            cur = conn.cursor(row_factory=dict_row)
            after = 0 if lastn is not None else row["summary_seq"]
            await cur.execute(_MESSAGE + " AND seq > %(after)s ORDER BY seq DESC LIMIT %(n)s",
                              {"key": row["id"], "after": after,
                               "n": lastn if lastn is not None else window})
            messages = [_message(r) for r in reversed(await cur.fetchall())]
            summary = None
            if row["summary_uuid"] is not None:
                await cur.execute(
                    "SELECT uuid, content, recent_message_uuid, recent_seq, token_count, source,"
                    " created_at FROM summaries WHERE namespace_id = %s AND uuid = %s"
                    " AND deleted_at IS NULL", (ns, row["summary_uuid"]))
                found = await cur.fetchone()
                summary = Summary(**found) if found else None
        return Memory(session=_session(row), summary=summary, messages=messages,
                      summary_lag=summary_lag(row["last_seq"], row["summary_seq"], window))

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
