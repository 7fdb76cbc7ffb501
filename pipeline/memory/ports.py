"""The ports of conversation memory's services: the summariser, the after-commit work on
messages and sessions, and the searcher. Each has one production adapter:
`pipeline/memory/summarisers.py` and `pipeline/memory/store/{work,fold,search}.py`. The values
they trade are in `pipeline/domain/memory_values.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, runtime_checkable

from pipeline.domain.memory_values import (
    ClaimedMessage,
    ClaimedSession,
    ClaimedSummary,
    FoldInput,
    MemoryRow,
    MemoryScope,
    ScopeFacts,
)
from pipeline.domain.read_model import Hit
from pipeline.embedding.reuse import Key, VectorReuse


@runtime_checkable
class Summariser(Protocol):
    """Folds conversation turns into a running summary (`pipeline/memory/summarisers.py`).

    `summarise` gets the previous summary (None for the first fold) and the turns to fold, as
    `"role: content"` lines in conversation order, none of them empty chatter, and answers the
    new summary, at most `budget_tokens` approximate tokens (`pipeline/domain/chunking.py`).
    Transient failures (an endpoint down) raise `Unavailable`; callers retry, summarisers do not.
    """

    name: str

    def summarise(self, previous: str | None, lines: Sequence[str], budget_tokens: int) -> str:
        """The summary of `previous` followed by `lines`."""
        ...


class MessageWork(Protocol):
    """The per-message extractor rows: claimed with a lease, written back by compare-and-set
    (a write whose lease stamp is no longer the row's, or whose message changed, is dropped)."""

    def claim_messages(self, extractor: str, sessions: Sequence[uuid.UUID] | None, *,
                       lease: float, limit: int, context_turns: int = 0
                       ) -> list[ClaimedMessage]: ...

    def write_results(self, extractor: str,
                      results: Sequence[tuple[ClaimedMessage, Any]]) -> int:
        """Store results where the claims hold; how many were stored."""
        ...

    def find_vectors(self, reuse: VectorReuse, keys: Sequence[Key]) -> dict[Key, Any]:
        """Stored vectors of messages' dense texts by (namespace, text hash)."""
        ...

    def mark_failed(self, extractor: str, rows: Sequence[ClaimedMessage], error: str) -> None: ...


class SummaryWork(Protocol):
    """The per-session summariser rows and the summaries: one claim per session at a time."""

    def claim_sessions(self, sessions: Sequence[uuid.UUID] | None, *, lease: float,
                       limit: int) -> list[ClaimedSession]: ...

    def session_point(self, session_pk: uuid.UUID) -> tuple[int, int] | None:
        """(last_seq, summary_seq) of a live session; None when deleted or gone."""
        ...

    def fold_input(self, session_pk: uuid.UUID, count: int) -> FoldInput | None: ...

    def move_point(self, claim: ClaimedSession, *, from_seq: int, to_seq: int,
                   recent_uuid: uuid.UUID, content: str | None, vector: Any) -> bool:
        """Write the summary (None: only the point moves) and move the point, while the claim
        holds and nobody moved the point; False otherwise."""
        ...

    def release(self, claim: ClaimedSession, *, error: str | None = None,
                keep_pending: bool = False) -> bool: ...

    def claim_summary_embeddings(self, sessions: Sequence[uuid.UUID] | None, *, lease: float,
                                 limit: int) -> list[ClaimedSummary]: ...

    def store_summary_embeddings(self, rows: Sequence[tuple[ClaimedSummary, Any]]) -> int: ...


class MemorySearcher(Protocol):
    """Candidates, rows and neighbours of memory search, within one namespace."""

    def one_connection(self) -> AbstractAsyncContextManager[None]:
        """The block's statements share one database connection, run one at a time."""
        ...

    async def sessions(self, namespace: uuid.UUID, *, session_id: str | None = None,
                       user_id: str | None = None, limit: int = 1000
                       ) -> dict[uuid.UUID, str]:
        """The live sessions (row id -> session_id) of one session id, or of one user."""
        ...

    async def lexical(self, namespace: uuid.UUID, kind: str, scope: MemoryScope, query: str,
                      k: int, *, own_words: bool = False) -> list[Hit]: ...

    async def dense(self, namespace: uuid.UUID, kind: str, scope: MemoryScope,
                    vector: Sequence[float], k: int) -> list[Hit]: ...

    async def facts(self, namespace: uuid.UUID, sessions: Sequence[uuid.UUID]) -> ScopeFacts:
        """The speakers and last message time of the sessions (the recall rules' input)."""
        ...

    async def sharing_entities(self, namespace: uuid.UUID, scope: MemoryScope,
                               norms: Sequence[str], exclude: Sequence[uuid.UUID], k: int, *,
                               max_share: float) -> list[Hit]: ...

    async def rows(self, namespace: uuid.UUID, kind: str, ids: Sequence[uuid.UUID]
                   ) -> dict[uuid.UUID, MemoryRow]: ...

    async def neighbours(self, namespace: uuid.UUID, session_pk: uuid.UUID, seq: int,
                         radius: int) -> list[MemoryRow]: ...
