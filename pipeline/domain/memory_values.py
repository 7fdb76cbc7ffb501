"""The values memory's ports trade (`pipeline/ports.py`: MessageWork, SummaryWork,
MemorySearcher): claimed work, a fold's input, a search's scope and rows, the checked `where`.

Here rather than in `pipeline/memory/` so the ports depend on `domain/` alone and the Postgres
adapters (`pipeline/stores/postgres/memory_*.py`) never import the memory wing's services.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias
from uuid import UUID

MESSAGE = "message"
SUMMARY = "summary"


@dataclass(frozen=True)
class ClaimedMessage:
    """One message claimed for one extractor; `lease` (the claim's stamp) is its token;
    `previous` the content of the turn before it in its session (None for the first)."""

    namespace_id: uuid.UUID
    message_uuid: uuid.UUID
    session_pk: uuid.UUID
    lease: datetime
    content: str
    event_id: str | None
    previous: str | None = None


def context_text(message: ClaimedMessage) -> str:
    """What a message is embedded and found lexically by: the turn before it, then itself (a
    reply alone often lacks the subject its question named)."""
    if message.previous is None:
        return message.content
    return f"{message.previous}\n{message.content}"


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


@dataclass(frozen=True)
class ClaimedSummary:
    """A summary claimed for its embedding."""

    namespace_id: uuid.UUID
    summary_uuid: uuid.UUID
    content: str
    lease: datetime


@dataclass(frozen=True)
class PathCondition:
    """One `where` leaf: a JSONPath expression and its variables; `negate` for `exists: false`."""

    jsonpath: str
    variables: dict[str, Any]
    negate: bool = False


@dataclass(frozen=True)
class Group:
    """`and` (all) or `or` (any) of its members."""

    op: str
    members: tuple[Condition, ...]


Condition: TypeAlias = PathCondition | Group


@dataclass(frozen=True)
class MemoryScope:
    """Which rows a search may return: these sessions' visible rows, the `where` filter on
    message metadata (summaries have none: a `where` leaves them out), a creation-time range."""

    sessions: tuple[uuid.UUID, ...]
    where: Condition | None = None
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True)
class MemoryRow:
    """A message or summary as a hit shows it."""

    kind: str  # MESSAGE or SUMMARY
    uuid: UUID
    session_pk: UUID
    seq: int  # a summary's: the seq of the last message it folds
    role: str | None
    content: str
    metadata: dict[str, Any]
    token_count: int | None
    created_at: datetime
    vector: Any
