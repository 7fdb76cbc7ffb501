"""Request and response bodies of the conversation-memory routes (`api/routes/memory.py`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from api.plain_text import PLAIN_JSON, PLAIN_TEXT
from pipeline.domain.memory_model import Memory, Message, Session, Summary
from schemas.limits import MESSAGE_CONTENT_MAX, MESSAGES_PER_EVENT, METADATA_KEYS_MAX
from schemas.memory import MessageIn, Metadata


class SessionOut(BaseModel):
    session_id: str
    user_id: str | None
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    message_count: int = Field(description="messages ever added (hidden ones included)")

    @classmethod
    def of(cls, s: Session) -> SessionOut:
        return cls(session_id=s.session_id, user_id=s.user_id, metadata=s.metadata,
                   created_at=s.created_at, updated_at=s.updated_at, message_count=s.last_seq)


class SessionsOut(BaseModel):
    sessions: list[SessionOut]
    next_after: str | None = Field(description="pass as `after` for the next page; null: last")


class MessageOut(BaseModel):
    uuid: UUID
    seq: int
    role: str
    content: str
    metadata: dict[str, Any]
    token_count: int | None
    created_at: datetime

    @classmethod
    def of(cls, m: Message) -> MessageOut:
        return cls(**m.__dict__)


class MessagesOut(BaseModel):
    messages: list[MessageOut]
    next_after_seq: int | None = Field(description="pass as `after_seq` for the next page; "
                                                   "null: last")


class SummaryOut(BaseModel):
    uuid: UUID
    content: str
    recent_message_uuid: UUID
    token_count: int | None
    source: str
    created_at: datetime

    @classmethod
    def of(cls, s: Summary) -> SummaryOut:
        return cls(uuid=s.uuid, content=s.content, recent_message_uuid=s.recent_message_uuid,
                   token_count=s.token_count, source=s.source, created_at=s.created_at)


class MemoryOut(BaseModel):
    summary: SummaryOut | None
    messages: list[MessageOut]
    metadata: dict[str, Any] = Field(description="the session's metadata")
    summary_lag: int = Field(description="messages past the summary point that do not fit the "
                                         "window and are not folded into the summary yet")

    @classmethod
    def of(cls, m: Memory) -> MemoryOut:
        return cls(summary=SummaryOut.of(m.summary) if m.summary else None,
                   messages=[MessageOut.of(x) for x in m.messages],
                   metadata=m.session.metadata, summary_lag=m.summary_lag)


class MessageBody(MessageIn):
    """One message of `POST /v1/sessions/{id}/messages`: the event's message, its content and
    metadata refused here when they hold a control character (the consumer would dead-letter
    a NUL the API had already accepted with a 202)."""

    model_config = ConfigDict(title="MessageBody")

    content: Annotated[StrictStr, Field(max_length=MESSAGE_CONTENT_MAX), PLAIN_TEXT]
    metadata: Annotated[Metadata, PLAIN_JSON] = Field(default_factory=dict,
                                                      max_length=METADATA_KEYS_MAX)


class PostMessagesBody(BaseModel):
    """Messages to add to the session (published as a `brainstream.messages.add` event)."""

    model_config = ConfigDict(extra="forbid")

    messages: list[MessageBody] = Field(min_length=1, max_length=MESSAGES_PER_EVENT)
    wait: bool = Field(default=False, description="wait (bounded) until the messages are stored")


class WriteOut(BaseModel):
    event_id: str
    status: Literal["applied", "accepted"]
    messages: list[MessageOut] = Field(description="the stored messages when `applied`")
