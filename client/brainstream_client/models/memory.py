"""Conversation memory: sessions, messages, the write-through, and memory search (the API's
`api/memory_schemas.py` and `api/memory_search_schemas.py`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import Field

from brainstream_client.models.base import Answer, Body
from brainstream_client.models.read import RichObjectOut

Channel = Literal["lexical", "dense"]


def _both_channels() -> list[Channel]:
    return ["lexical", "dense"]


class SessionOut(Answer):
    session_id: str
    user_id: str | None
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    message_count: int


class SessionsOut(Answer):
    """A page of sessions; `next_after` pages on (the client's `iter_sessions` follows it)."""

    sessions: list[SessionOut]
    next_after: str | None


class SummaryOut(Answer):
    uuid: UUID
    content: str
    recent_message_uuid: UUID
    token_count: int | None
    source: str
    created_at: datetime


class MessageOut(Answer):
    uuid: UUID
    seq: int
    role: str
    content: str
    metadata: dict[str, Any]
    token_count: int | None
    created_at: datetime


class MemoryOut(Answer):
    summary: SummaryOut | None
    messages: list[MessageOut]
    metadata: dict[str, Any]
    summary_lag: int


class MessagesOut(Answer):
    """A page of messages; `next_after_seq` pages on (the client's `iter_messages`)."""

    messages: list[MessageOut]
    next_after_seq: int | None


class MessageBody(Body):
    """One message to add; its `uuid` makes a retried write idempotent."""

    uuid: UUID
    role: str
    content: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime | None = None


class PostMessagesBody(Body):
    messages: list[MessageBody]
    wait: bool = False


class WriteOut(Answer):
    event_id: str
    status: Literal["applied", "accepted"]
    messages: list[MessageOut]


class MemorySearchBody(Body):
    query: str
    limit: int = 10
    search_scope: Literal["messages", "summary", "both"] = "messages"
    where: dict[str, Any] | None = None
    since: datetime | None = None
    until: datetime | None = None
    min_score: float = 0.0
    mmr_lambda: float | None = None
    context: int = 0
    channels: list[Channel] = Field(default_factory=_both_channels)
    include_knowledge: bool = False


class UserMemorySearchBody(MemorySearchBody):
    user_id: str


class TurnOut(Answer):
    kind: Literal["message", "summary"]
    uuid: UUID
    seq: int
    role: str | None
    content: str
    metadata: dict[str, Any]
    token_count: int | None
    created_at: datetime


class MemoryHitOut(TurnOut):
    session_id: str
    score: float
    context: list[TurnOut]
    source: Literal["memory"] = "memory"


class KnowledgeHitOut(RichObjectOut):
    """A document hit of a memory search with `include_knowledge`."""

    source: Literal["knowledge"] = "knowledge"


class MemorySearchOut(Answer):
    results: list[MemoryHitOut]
    degraded: str | None = None
    knowledge: list[KnowledgeHitOut] | None = None
    knowledge_degraded: str | None = None
