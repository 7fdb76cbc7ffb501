"""Conversation-memory test helpers: build memory events, send them keyed by session, and read
what Postgres and the dead-letter topic hold."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg

from pipeline.domain.memory_model import session_key
from pipeline.settings import Settings
from tests.pipelineutil import Publisher, envelope, read_topic


def key_of(ns: uuid.UUID | str, session_id: str) -> str:
    """The record key of a session's events (what the publisher uses)."""
    return str(session_key(uuid.UUID(str(ns)), session_id))


def message(content: str, role: str = "user", **extra: Any) -> dict[str, Any]:
    return {"uuid": str(uuid.uuid4()), "role": role, "content": content, **extra}


def add(ns: uuid.UUID | str, session_id: str, *messages: dict[str, Any]) -> dict[str, Any]:
    return envelope("messages.add", ns, {"session_id": session_id, "messages": list(messages)})


def session_put(ns: uuid.UUID | str, session_id: str, **data: Any) -> dict[str, Any]:
    return envelope("session.put", ns, {"session_id": session_id, **data})


def send(publisher: Publisher, ns: uuid.UUID | str, session_id: str,
         *events: dict[str, Any] | bytes) -> None:
    """Send events on the session's key, in order (one partition)."""
    for event in events:
        publisher.send(event if isinstance(event, bytes) else json.dumps(event).encode(),
                       key_of(ns, session_id))


def session_row(settings: Settings, ns: uuid.UUID | str, session_id: str
                ) -> dict[str, Any] | None:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        cur = conn.execute(
            "SELECT session_id, user_id, metadata, last_seq, summary_seq, summary_uuid,"
            " deleted_at FROM sessions WHERE namespace_id = %s AND session_id = %s",
            (str(ns), session_id))
        row = cur.fetchone()
        names = [d.name for d in cur.description or []]
    return dict(zip(names, row, strict=True)) if row else None


def messages_of(settings: Settings, ns: uuid.UUID | str, session_id: str, *,
                visible: bool = True) -> list[dict[str, Any]]:
    """The session's messages by seq (the hidden ones too unless `visible`); `metadata` is the
    publisher's (without `system`, which the extractors write on their own time), `system`
    apart."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        cur = conn.execute(
            "SELECT m.uuid::text, m.seq, m.role, m.content, m.metadata - 'system' AS metadata,"
            " m.metadata -> 'system' AS system, m.deleted_at"
            " FROM messages m JOIN sessions s ON s.id = m.session_pk"
            " WHERE s.namespace_id = %s AND s.session_id = %s"
            " AND (NOT %s OR m.deleted_at IS NULL) ORDER BY m.seq",
            (str(ns), session_id, visible))
        names = [d.name for d in cur.description or []]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def dead_letters(settings: Settings, event_ids: list[str]) -> dict[str, dict[str, str]] | None:
    """Headers of the dead letter of each event id (found in the letter's value: an event that
    did not parse has no id header), or None while one is missing."""
    letters = read_topic(settings, settings.topic_dlq, timeout_ms=1500)
    found = {eid: headers for eid in event_ids for _, value, headers in letters
             if eid.encode() in value}
    return found if len(found) == len(event_ids) else None
