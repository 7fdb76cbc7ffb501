"""The values of conversation memory (issue 12): sessions, messages, summaries, a session's memory,
and the names the write side, the extractors and the read side agree on.

Pure data and rules, no I/O: the ingest handlers (`pipeline/ingest/memory.py`), the Postgres
adapter (`pipeline/memory/store/writes.py`), the extractors and the API all trade these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final
from uuid import UUID

# re-exported: the memory wing's modules take every memory name from here
from pipeline.domain.sessions import SYSTEM_KEY as SYSTEM_KEY, session_key as session_key

# The extractors that work on every message after it is committed, one state row each
# (migrations/0017_memory.sql: message_extraction.extractor).
TOKEN_EXTRACTOR: Final = "token"
EMBED_EXTRACTOR: Final = "embed"
ENTITIES_EXTRACTOR: Final = "entities"
MESSAGE_EXTRACTORS: Final = (TOKEN_EXTRACTOR, EMBED_EXTRACTOR, ENTITIES_EXTRACTOR)

# The keys under `system` that extractors own (written by the `entities` extractor): a privileged
# publisher's overwrite or removal of `system` keeps them unless its value names them, since the
# extractor ran once (its row is done) and would not write them again.
EXTRACTOR_SYSTEM_KEYS: Final = ("entities",)

# Who wrote a summary (summaries.source).
SUMMARY_BY_SUMMARISER: Final = "summariser"
SUMMARY_EXTERNAL: Final = "external"


def unsummarised(last_seq: int, summary_seq: int) -> int:
    """How many messages lie past the summary point (seqs are dense: every add takes the next)."""
    return max(0, last_seq - summary_seq)


def summary_lag(last_seq: int, summary_seq: int, window: int) -> int:
    """How many messages past the summary point do not fit the window: the summariser's debt."""
    return max(0, unsummarised(last_seq, summary_seq) - window)


@dataclass(frozen=True)
class NewMessage:
    """One message of a `messages.add` event, as the write path stores it."""

    uuid: UUID
    role: str
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None  # None: the event's time


@dataclass(frozen=True)
class SessionHead:
    """The write path's view of a session row (locked while an event about it applies)."""

    id: UUID
    namespace_id: UUID
    last_seq: int
    summary_seq: int
    deleted_at: datetime | None


@dataclass(frozen=True)
class Session:
    """A live session as the read side returns it."""

    session_id: str
    user_id: str | None
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    last_seq: int
    summary_seq: int


@dataclass(frozen=True)
class Message:
    """A visible message as the read side returns it."""

    uuid: UUID
    seq: int
    role: str
    content: str
    metadata: dict[str, Any]
    token_count: int | None
    created_at: datetime


@dataclass(frozen=True)
class Summary:
    """A summary: `content` folds every message up to `recent_message_uuid` (seq `recent_seq`)."""

    uuid: UUID
    content: str
    recent_message_uuid: UUID
    recent_seq: int
    token_count: int | None
    source: str
    created_at: datetime


@dataclass(frozen=True)
class Memory:
    """What GET memory answers: the latest summary, the messages asked for (oldest first), and
    how far the summariser is behind the window."""

    session: Session
    summary: Summary | None
    messages: list[Message]
    summary_lag: int
