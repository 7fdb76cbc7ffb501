"""The values memory's ports trade (`pipeline/memory/ports.py`: MessageWork, SummaryWork,
MemorySearcher): claimed work, a fold's input, a search's scope and rows, the checked `where`.

Here rather than in `pipeline/memory/` so the ports depend on `domain/` alone.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal
from uuid import UUID

from pipeline.domain.conditions import Condition

MESSAGE = "message"
SUMMARY = "summary"


@dataclass(frozen=True)
class ClaimedMessage:
    """One message claimed for one extractor; `lease` (the claim's stamp) is its token;
    `previous` the contents of the turns before it in its session, oldest first (as many as
    the claim asked for; none for the first); `created_at` its time."""

    namespace_id: uuid.UUID
    message_uuid: uuid.UUID
    session_pk: uuid.UUID
    lease: datetime
    content: str
    event_id: str | None
    previous: tuple[str, ...] = ()
    created_at: datetime | None = None


DateIn = Literal["none", "lexical", "both"]


@dataclass(frozen=True)
class ContextRule:
    """What a message is embedded and found lexically by: the turns before it, then itself (a
    reply alone often lacks the subject its question named, and an answer often comes a turn or
    two after its question). Lexical search reads the `lexical_turns` turns before it, the
    embedder the `dense_turns` before it (an embedder blurs a longer text into its average;
    words stay words); its date ("8 May 2023", UTC) goes first in the lexical text (`date`
    "lexical"), in both texts ("both") or in neither ("none"): "when" questions name months
    and years that the words of a turn seldom carry. Chosen on one LoCoMo dev conversation
    (docs/operations.md)."""

    lexical_turns: int = 2
    dense_turns: int = 1
    date: DateIn = "lexical"

    @property
    def turns(self) -> int:
        """How many turns before a message the texts need."""
        return max(self.lexical_turns, self.dense_turns)

    def dense_text(self, message: ClaimedMessage) -> str:
        """The text the embedder gets."""
        return self._text(message, self.dense_turns, dated=self.date == "both")

    def lexical_text(self, message: ClaimedMessage) -> str:
        """The text whose lexemes lexical search reads (`messages.context_lexical`)."""
        return self._text(message, self.lexical_turns, dated=self.date != "none")

    @staticmethod
    def _text(message: ClaimedMessage, turns: int, *, dated: bool) -> str:
        kept = message.previous[-turns:] if turns else ()  # previous[-0:] is every turn
        lines = [*kept, message.content]
        if dated and message.created_at is not None:
            when = message.created_at.astimezone(UTC)
            lines.insert(0, f"{when.day} {when:%B %Y}")
        return "\n".join(lines)


@dataclass(frozen=True)
class MessageIndex:
    """The embed extractor's result for one message: the vector of its dense text and its
    lexical text (`ContextRule`), stored together, with the hash of the dense text and the key
    of the model that embedded it (what a later embedding of the same text reuses)."""

    vector: Any
    lexical: str
    text_hash: str | None = None
    model: str | None = None


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
class MemoryScope:
    """Which rows a search may return: these sessions' visible rows, the `where` filter on
    message metadata (summaries have none: a `where` leaves them out), a creation-time range,
    the speakers."""

    sessions: tuple[uuid.UUID, ...]
    where: Condition | None = None
    since: datetime | None = None
    until: datetime | None = None
    # only messages said by one of these speakers (lower case; `pipeline/memory/speakers.py`)
    speakers: tuple[str, ...] | None = None


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


@dataclass(frozen=True)
class ScopeFacts:
    """What the recall rules read about a search's sessions before they run: the speakers of
    their messages (lower case) and the time of their last message."""

    speakers: frozenset[str]
    last_said: datetime | None
