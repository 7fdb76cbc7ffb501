"""The `data` models of the conversation-memory events (issue 12): a session put and delete, an
add of messages, one message's metadata key, and an externally computed summary.

Every one names its session by the publisher's `session_id`; the record key is the session's
derived key (`pipeline.domain.memory_model.session_key`), so one session's events stay in
order on one partition. Registered with the other payloads in `schemas.payloads`.
"""

from __future__ import annotations

from typing import Annotated, Any, Final
from uuid import UUID

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pipeline.domain.sessions import SYSTEM_KEY
from schemas.limits import (
    MESSAGE_CONTENT_MAX,
    MESSAGES_PER_EVENT,
    METADATA_KEY_MAX,
    METADATA_KEYS_MAX,
    ROLE_MAX,
    SESSION_ID_MAX,
    SUMMARY_CONTENT_MAX,
    USER_ID_MAX,
)

SESSION_PUT: Final = "brainstream.session.put"
SESSION_DELETE: Final = "brainstream.session.delete"
MESSAGES_ADD: Final = "brainstream.messages.add"
MESSAGE_METADATA: Final = "brainstream.message.metadata"
SUMMARY_PUT: Final = "brainstream.summary.put"


# Non-blank and bounded; any other character is the publisher's choice.
SessionId = Annotated[StrictStr, Field(min_length=1, max_length=SESSION_ID_MAX, pattern=r"\S")]
# A role names a speaker kind (user, assistant, human, ai, tool, system, ...): a word.
Role = Annotated[StrictStr, Field(pattern=rf"^[A-Za-z][A-Za-z0-9_.-]{{0,{ROLE_MAX - 1}}}$")]
MetadataKey = Annotated[StrictStr, Field(min_length=1, max_length=METADATA_KEY_MAX)]
# Metadata is free JSON (nested objects too, as Zep's); the record's size bounds it.
Metadata = dict[MetadataKey, Any]


def _system_is_object(value: Any) -> Any:
    # The extractors add their keys (`entities`) inside `system`: a list or a string there
    # would leave them nowhere to go.
    if not isinstance(value, dict):
        raise ValueError("the `system` metadata key holds a JSON object (remove it with "
                         "`delete: true`)")
    return value


def _require_str(value: Any) -> Any:
    # Lax datetime parsing would read a bare number as a Unix timestamp; we take RFC 3339 only.
    if not isinstance(value, str):
        raise ValueError("created_at must be an RFC 3339 string")
    return value


class SessionPut(BaseModel):
    """`data` of `brainstream.session.put`: create a session or update it. `metadata` is merged
    into the stored metadata key by key (a key set to null is removed); `user_id`, when given,
    replaces the stored one. A soft-deleted session is revived, without its old messages."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="SessionPut")

    session_id: SessionId
    user_id: Annotated[StrictStr, Field(min_length=1, max_length=USER_ID_MAX)] | None = None
    metadata: Metadata = Field(default_factory=dict, max_length=METADATA_KEYS_MAX)


class SessionDelete(BaseModel):
    """`data` of `brainstream.session.delete`: hide the session, its messages and summaries."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="SessionDelete")

    session_id: SessionId


class MessageIn(BaseModel):
    """One message of a `brainstream.messages.add`."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="MessageIn")

    uuid: UUID
    role: Role
    content: Annotated[StrictStr, Field(max_length=MESSAGE_CONTENT_MAX)]
    metadata: Metadata = Field(default_factory=dict, max_length=METADATA_KEYS_MAX)
    created_at: Annotated[AwareDatetime, BeforeValidator(_require_str)] | None = None

    @field_validator("metadata")
    @classmethod
    def _system_object(cls, value: dict[str, Any]) -> dict[str, Any]:
        if SYSTEM_KEY in value:
            _system_is_object(value[SYSTEM_KEY])
        return value


class MessagesAdd(BaseModel):
    """`data` of `brainstream.messages.add`: messages appended to a session in the order given
    (a session that does not exist is created). Idempotent by message uuid: a message already
    stored is left as it is."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="MessagesAdd")

    session_id: SessionId
    messages: list[MessageIn] = Field(min_length=1, max_length=MESSAGES_PER_EVENT)

    @field_validator("messages")
    @classmethod
    def _distinct_uuids(cls, value: list[MessageIn]) -> list[MessageIn]:
        # Two messages of one event under one uuid: which one the publisher meant is unknown.
        seen: set[UUID] = set()
        for index, message in enumerate(value):
            if message.uuid in seen:
                raise ValueError(f"messages[{index}].uuid {message.uuid} appears twice in "
                                 "this event")
            seen.add(message.uuid)
        return value


class MessageMetadata(BaseModel):
    """`data` of `brainstream.message.metadata`: set one top-level metadata key of one message
    (`value`, any JSON) or remove it (`delete: true`). The `system` key needs a privileged
    publisher key, and its value is an object."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="MessageMetadata")

    session_id: SessionId
    uuid: UUID
    key: MetadataKey
    value: Any = None
    delete: StrictBool = False

    @model_validator(mode="after")
    def _value_or_delete(self) -> MessageMetadata:
        has_value = "value" in self.model_fields_set
        if self.delete == has_value:
            raise ValueError("give either `value` or `delete: true`")
        return self

    @field_validator("value")
    @classmethod
    def _system_object(cls, value: Any, info: ValidationInfo) -> Any:
        return _system_is_object(value) if info.data.get("key") == SYSTEM_KEY else value


class SummaryPut(BaseModel):
    """`data` of `brainstream.summary.put`: a summary computed outside, folding every message of
    the session up to `recent_message_uuid` (the new summary point)."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="SummaryPut")

    session_id: SessionId
    uuid: UUID
    content: Annotated[StrictStr, Field(min_length=1, max_length=SUMMARY_CONTENT_MAX)]
    recent_message_uuid: UUID


MemoryPayload = SessionPut | SessionDelete | MessagesAdd | MessageMetadata | SummaryPut
MEMORY_PAYLOAD_MODELS: Final[dict[str, type[MemoryPayload]]] = {
    SESSION_PUT: SessionPut, SESSION_DELETE: SessionDelete, MESSAGES_ADD: MessagesAdd,
    MESSAGE_METADATA: MessageMetadata, SUMMARY_PUT: SummaryPut,
}
