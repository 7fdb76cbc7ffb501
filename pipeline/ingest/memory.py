"""Applying the conversation-memory events (issue 12): session put and delete, messages add,
one message's metadata key, an external summary.

Decisions (docs/memory.md): messages for a session that does not exist create it
(as Zep does: a conversation starts with its first message); anything but a session.put for a
soft-deleted session is refused `session_deleted` (a session.put revives it first, without its
old messages); a message uuid already stored in the session is left as it is (adds are
idempotent, the first write wins), one stored in another session is refused. The top-level
`system` metadata key is written only by records signed with a privileged publisher key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.domain.memory_errors import (
    MessageNotFound,
    PrivilegedKeyRequired,
    SessionDeleted,
    SessionNotFound,
    UuidInOtherSession,
)
from pipeline.domain.memory_model import (
    MESSAGE_EXTRACTORS,
    SYSTEM_KEY,
    NewMessage,
    SessionHead,
    session_key,
)
from pipeline.ingest.records import Applying
from schemas.events import ParsedEvent
from schemas.memory import MessageMetadata, MessagesAdd, SessionDelete, SessionPut, SummaryPut


def _live(ctx: Applying, event: ParsedEvent, session_id: str) -> SessionHead:
    """The session's row, locked; refused when it is missing or soft-deleted."""
    head = ctx.store.memory.lock_session(session_key(event.namespace, session_id))
    if head is None:
        raise SessionNotFound("no such session in this namespace", field="data.session_id")
    if head.deleted_at is not None:
        raise SessionDeleted("the session is deleted (a session.put revives it)",
                             field="data.session_id")
    return head


def _no_system(ctx: Applying, metadata: Mapping[str, Any], field: str) -> None:
    if SYSTEM_KEY in metadata and not ctx.privileged:
        raise PrivilegedKeyRequired(
            "the `system` metadata key is written only by records signed with a privileged "
            "publisher key", field=field)


def put_session(ctx: Applying, event: ParsedEvent, data: SessionPut) -> None:
    """Create, update or revive a session."""
    memory = ctx.store.memory
    key = session_key(event.namespace, data.session_id)
    memory.lock_session(key)  # serializes with a concurrent add that creates it
    memory.put_session(event.namespace, key, data.session_id, data.user_id,
                       dict(data.metadata), event.event_id)


def delete_session(ctx: Applying, event: ParsedEvent, data: SessionDelete) -> None:
    """Soft-delete a session (a second delete changes nothing)."""
    memory = ctx.store.memory
    head = memory.lock_session(session_key(event.namespace, data.session_id))
    if head is None:
        raise SessionNotFound("no such session in this namespace", field="data.session_id")
    memory.delete_session(head.id, event.event_id)


def add_messages(ctx: Applying, event: ParsedEvent, data: MessagesAdd) -> None:
    """Append the messages not stored yet, in order; create the session when it is new."""
    memory = ctx.store.memory
    for index, message in enumerate(data.messages):
        _no_system(ctx, message.metadata, f"data.messages[{index}].metadata.system")
    key = session_key(event.namespace, data.session_id)
    head = memory.lock_session(key)
    if head is None:
        memory.put_session(event.namespace, key, data.session_id, None, {}, event.event_id)
        head = memory.lock_session(key)
        assert head is not None  # written just now, in this transaction
    elif head.deleted_at is not None:
        raise SessionDeleted("the session is deleted (a session.put revives it)",
                             field="data.session_id")
    stored = memory.message_sessions(event.namespace, [m.uuid for m in data.messages])
    for index, message in enumerate(data.messages):
        if stored.get(message.uuid, key) != key:
            raise UuidInOtherSession("this message uuid belongs to another session",
                                     field=f"data.messages[{index}].uuid")
    new = [NewMessage(m.uuid, m.role, m.content, dict(m.metadata), m.created_at)
           for m in data.messages if m.uuid not in stored]
    memory.append_messages(head, new, MESSAGE_EXTRACTORS, event.event_id)
    if new:
        ctx.outcome.memory_sessions.add(key)


def set_message_metadata(ctx: Applying, event: ParsedEvent, data: MessageMetadata) -> None:
    """Set or remove one top-level metadata key of a visible message."""
    if data.key == SYSTEM_KEY:
        _no_system(ctx, {SYSTEM_KEY: None}, "data.key")
    head = _live(ctx, event, data.session_id)
    memory = ctx.store.memory
    if memory.message_seq(head.id, data.uuid) is None:
        raise MessageNotFound("no such message in this session", field="data.uuid")
    memory.set_message_key(head.id, data.uuid, data.key, data.value, delete=data.delete)


def put_summary(ctx: Applying, event: ParsedEvent, data: SummaryPut) -> None:
    """Store an external summary up to a visible message of the session (the new point)."""
    head = _live(ctx, event, data.session_id)
    memory = ctx.store.memory
    seq = memory.message_seq(head.id, data.recent_message_uuid)
    if seq is None:
        raise MessageNotFound("recent_message_uuid names no message of this session",
                              field="data.recent_message_uuid")
    if not memory.put_summary(head, data.uuid, data.content, data.recent_message_uuid, seq,
                              event.event_id):
        raise UuidInOtherSession("this summary uuid belongs to another session",
                                 field="data.uuid")
    ctx.outcome.memory_sessions.add(head.id)
