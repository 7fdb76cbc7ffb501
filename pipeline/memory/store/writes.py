"""Postgres adapter of `MemoryWriter` (`pipeline/ports.py`): the SQL of the memory events, on the
batch's connection and inside its transaction (`PgEventStore.memory`; driver errors become the
port's there). Tables: migrations/0017_memory.sql.

Writes are stamped with the record's time (`EVENT_TIME`), so a replay writes the same times.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from pipeline.domain.memory_model import EXTRACTOR_SYSTEM_KEYS, SYSTEM_KEY, NewMessage, SessionHead
from pipeline.postgres.timing import EVENT_TIME

Conn = psycopg.Connection[Any]

_PUT_SESSION = f"""
INSERT INTO sessions AS s (id, namespace_id, session_id, user_id, metadata, event_id,
                           created_at, updated_at)
VALUES (%(key)s, %(ns)s, %(sid)s, %(user)s, %(meta)s, %(event)s,
        {EVENT_TIME}, {EVENT_TIME})
ON CONFLICT (id) DO UPDATE SET
    user_id = coalesce(EXCLUDED.user_id, s.user_id),
    -- merged key by key; a key sent as null is removed
    metadata = (s.metadata - %(unset)s::text[]) || %(meta)s,
    event_id = EXCLUDED.event_id,
    updated_at = {EVENT_TIME},
    deleted_at = NULL,
    -- a revived session starts after its hidden messages: they are neither shown nor folded
    summary_seq = CASE WHEN s.deleted_at IS NULL THEN s.summary_seq ELSE s.last_seq END,
    summary_uuid = CASE WHEN s.deleted_at IS NULL THEN s.summary_uuid END
"""

_APPEND = f"""
INSERT INTO messages (namespace_id, uuid, session_pk, seq, role, content, metadata, event_id,
                      created_at, received_at, updated_at)
SELECT %(ns)s, m.uuid, %(key)s, %(first)s + m.n - 1, m.role, m.content, m.metadata, %(event)s,
       coalesce(m.created_at, {EVENT_TIME}), {EVENT_TIME}, {EVENT_TIME}
FROM unnest(%(uuids)s::uuid[], %(roles)s::text[], %(contents)s::text[], %(metas)s::jsonb[],
            %(times)s::timestamptz[]) WITH ORDINALITY AS m(uuid, role, content, metadata,
                                                           created_at, n)
"""

# The extractor-owned keys of the stored `system` object that the event's value does not name
# (on a delete, the value is SQL NULL and names none); an object, `{}` when none.
_KEPT_SYSTEM = """(SELECT coalesce(jsonb_object_agg(k, v), '{}'::jsonb)
    FROM jsonb_each(CASE jsonb_typeof(metadata -> 'system') WHEN 'object'
                    THEN metadata -> 'system' ELSE '{}'::jsonb END) AS s(k, v)
    WHERE k = ANY(%(owned)s::text[]) AND NOT coalesce(%(value)s::jsonb ? k, false))"""
_SYSTEM_SET = ("metadata || jsonb_build_object('system', " + _KEPT_SYSTEM
               + " || %(value)s::jsonb)")
_SYSTEM_DELETE = (f"CASE WHEN {_KEPT_SYSTEM} = '{{}}'::jsonb THEN metadata - 'system'"
                  f" ELSE jsonb_set(metadata, '{{system}}', {_KEPT_SYSTEM}) END")


class PgMemoryWriter:
    """The memory events' writes on one connection, inside the caller's transaction."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def lock_session(self, key: uuid.UUID) -> SessionHead | None:
        """The session row, locked until commit (events about one session serialize)."""
        row = self.conn.execute(
            "SELECT id, namespace_id, last_seq, summary_seq, deleted_at FROM sessions"
            " WHERE id = %s FOR UPDATE", (key,)).fetchone()
        return SessionHead(*row) if row else None

    def put_session(self, namespace: uuid.UUID, key: uuid.UUID, session_id: str,
                    user_id: str | None, metadata: dict[str, Any], event_id: str) -> None:
        """Create, update (metadata merged key by key, a null removes) or revive a session."""
        unset = [name for name, value in metadata.items() if value is None]
        kept = {name: value for name, value in metadata.items() if value is not None}
        self.conn.execute(_PUT_SESSION, {"key": key, "ns": namespace, "sid": session_id,
                                         "user": user_id, "meta": Jsonb(kept),
                                         "unset": unset, "event": event_id})

    def delete_session(self, key: uuid.UUID, event_id: str) -> None:
        """Hide a session with its visible messages and summaries, all at one time."""
        self.conn.execute(
            f"UPDATE sessions SET deleted_at = {EVENT_TIME}, updated_at = {EVENT_TIME},"
            " event_id = %s WHERE id = %s AND deleted_at IS NULL", (event_id, key))
        for table in ("messages", "summaries"):
            self.conn.execute(
                f"UPDATE {table} t SET deleted_at = s.deleted_at FROM sessions s"
                " WHERE s.id = %s AND t.session_pk = s.id AND t.deleted_at IS NULL", (key,))

    def message_sessions(self, namespace: uuid.UUID, uuids: Sequence[uuid.UUID]
                         ) -> dict[uuid.UUID, uuid.UUID]:
        """The session key of each message uuid already stored in the namespace."""
        rows = self.conn.execute(
            "SELECT uuid, session_pk FROM messages WHERE namespace_id = %s AND uuid = ANY(%s)",
            (namespace, list(uuids))).fetchall()
        return {row[0]: row[1] for row in rows}

    def append_messages(self, head: SessionHead, messages: Sequence[NewMessage],
                        extractors: Sequence[str], event_id: str) -> None:
        """Store new messages after the session's last (seq last_seq+1, ...), each with a pending
        state row per extractor, and ask for the session's summariser."""
        if not messages:
            return
        self.conn.execute(_APPEND, {
            "ns": head.namespace_id, "key": head.id, "first": head.last_seq + 1,
            "event": event_id, "uuids": [m.uuid for m in messages],
            "roles": [m.role for m in messages], "contents": [m.content for m in messages],
            "metas": [Jsonb(m.metadata) for m in messages],
            "times": [m.created_at for m in messages]})
        self.conn.execute(
            "INSERT INTO message_extraction (namespace_id, message_uuid, extractor, session_pk)"
            " SELECT %s, m, e, %s FROM unnest(%s::uuid[]) AS m, unnest(%s::text[]) AS e",
            (head.namespace_id, head.id, [m.uuid for m in messages], list(extractors)))
        self.conn.execute(
            f"UPDATE sessions SET last_seq = last_seq + %s, updated_at = {EVENT_TIME}"
            " WHERE id = %s", (len(messages), head.id))
        self.conn.execute(
            "INSERT INTO session_summariser (session_pk, namespace_id) VALUES (%s, %s)"
            " ON CONFLICT (session_pk) DO UPDATE SET pending = true,"
            " requests = session_summariser.requests + 1, requested_at = now(),"
            " updated_at = now()", (head.id, head.namespace_id))

    def message_seq(self, key: uuid.UUID, message: uuid.UUID) -> int | None:
        """The seq of a visible message of the session, locked (None: no such message)."""
        row = self.conn.execute(
            "SELECT seq FROM messages m JOIN sessions s ON s.id = m.session_pk"
            " WHERE s.id = %s AND m.namespace_id = s.namespace_id AND m.uuid = %s"
            " AND m.deleted_at IS NULL FOR UPDATE OF m", (key, message)).fetchone()
        return int(row[0]) if row else None

    def set_message_key(self, key: uuid.UUID, message: uuid.UUID, name: str,
                        value: Any, *, delete: bool) -> None:
        """Set (or remove) one top-level metadata key of a message. On `system`, the keys the
        extractors own there (`EXTRACTOR_SYSTEM_KEYS`) are kept unless `value` names them."""
        if name == SYSTEM_KEY:
            change = _SYSTEM_DELETE if delete else _SYSTEM_SET
        else:
            change = ("metadata - %(name)s" if delete
                      else "metadata || jsonb_build_object(%(name)s::text, %(value)s::jsonb)")
        self.conn.execute(
            f"UPDATE messages SET metadata = {change}, updated_at = {EVENT_TIME}"
            " WHERE session_pk = %(key)s AND uuid = %(uuid)s"
            " AND namespace_id = (SELECT namespace_id FROM sessions WHERE id = %(key)s)",
            {"key": key, "uuid": message, "name": name,
             "value": None if delete else Jsonb(value), "owned": list(EXTRACTOR_SYSTEM_KEYS)})

    def put_summary(self, head: SessionHead, summary: uuid.UUID, content: str,
                    recent_message: uuid.UUID, recent_seq: int, event_id: str) -> bool:
        """Store (or replace) an external summary and move the summary point forward to it;
        False when the uuid is another session's summary (nothing written)."""
        row = self.conn.execute(
            "INSERT INTO summaries AS t (namespace_id, uuid, session_pk, content,"
            " recent_message_uuid, recent_seq, source, event_id, created_at, updated_at)"
            f" VALUES (%s, %s, %s, %s, %s, %s, 'external', %s, {EVENT_TIME}, {EVENT_TIME})"
            " ON CONFLICT (namespace_id, uuid) DO UPDATE SET content = EXCLUDED.content,"
            " recent_message_uuid = EXCLUDED.recent_message_uuid,"
            " recent_seq = EXCLUDED.recent_seq, source = 'external',"
            " event_id = EXCLUDED.event_id, updated_at = EXCLUDED.updated_at,"
            " embedding = NULL, token_count = NULL, embed_status = 'pending',"
            " embed_attempts = 0, embed_error = NULL, deleted_at = NULL"
            " WHERE t.session_pk = EXCLUDED.session_pk RETURNING 1",
            (head.namespace_id, summary, head.id, content, recent_message, recent_seq,
             event_id)).fetchone()
        if row is None:
            return False
        # the point only moves forward: an older summary arriving late is kept, not shown
        self.conn.execute(
            f"UPDATE sessions SET summary_seq = %(seq)s, summary_uuid = %(uuid)s,"
            f" updated_at = {EVENT_TIME} WHERE id = %(key)s AND summary_seq <= %(seq)s",
            {"seq": recent_seq, "uuid": summary, "key": head.id})
        return True
