"""The session summariser: when a session's messages past the summary point exceed the window,
fold the oldest `len - window/2` into the summary and move the point.

One summariser at a time per session: the session's `session_summariser` row is claimed with a
lease, and the point moves by compare-and-set under that lease (the `SummaryWork` port:
`pipeline/memory/store/fold.py`). A fold takes
at most `memory_summary_max_step` messages; a larger backlog folds in several steps, each its own
transaction, so a kill -9 between steps loses nothing (the next run starts from the moved point)
and a step redone after a kill writes the same summary row (its id derives from the point).
Messages that are empty chatter ("ok", "thanks", emoji) move the point but never enter the text
(a fold of chatter alone, before any summary, moves the point and writes none).
The summariser's transient failures are retried by the one policy; exhausted (or refused), the
point stays, the reason is dead-lettered with `summary_failed`, and the next message tries again.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pipeline.domain.errors import BrainstreamError, Unavailable
from pipeline.domain.memory_errors import SummaryFailed
from pipeline.domain.memory_values import ClaimedSession
from pipeline.domain.retry import retry_transient
from pipeline.kafka.io import dead_letter_headers
from pipeline.memory.ports import Summariser, SummaryWork
from pipeline.memory.settings import MEMORY_RETRY_ATTEMPTS, MEMORY_RETRY_MAX_WAIT, MemorySettings
from pipeline.memory.summary_text import fold_steps, is_chatter
from pipeline.ports import DeadLetterSink, Embedder

log = logging.getLogger(__name__)

# The most messages one fold summarises (a larger backlog folds in several steps), and the
# summary's length in tokens: what an agent's prompt can carry beside the window.
SUMMARY_MAX_STEP = 64
SUMMARY_BUDGET_TOKENS = 256
SESSIONS_PER_CLAIM = 8
T = TypeVar("T")


@dataclass
class SummaryStats:
    folds: int = 0
    messages_folded: int = 0
    failed: int = 0
    summaries_embedded: int = 0


class SessionSummariser:
    """Folds what is past the window of the pending sessions (of some sessions, or all)."""

    def __init__(self, settings: MemorySettings, work: SummaryWork, summariser: Summariser,
                 embedder: Embedder, dead_letters: DeadLetterSink | None = None) -> None:
        self.settings = settings
        self.work = work
        self.summariser = summariser
        self.embedder = embedder
        self.dead_letters = dead_letters

    def run(self, sessions: Sequence[uuid.UUID] | None = None, *,
            max_rounds: int = 1000) -> SummaryStats:
        """Claim and fold until no session (of `sessions`) is pending and unclaimed."""
        stats = SummaryStats()
        self._embed_summaries(sessions, stats)
        for _ in range(max_rounds):
            claims = self.work.claim_sessions(sessions,
                                              lease=self.settings.memory_extract_lease_seconds,
                                              limit=SESSIONS_PER_CLAIM)
            if not claims:
                break
            for claim in claims:
                self._session(claim, stats)
        return stats

    def _embed_summaries(self, sessions: Sequence[uuid.UUID] | None,
                         stats: SummaryStats) -> None:
        """Vectors for summaries that lack one; an embedder outage leaves them pending (their
        lease runs out and a later run tries again: a summary is still found lexically)."""
        claimed = self.work.claim_summary_embeddings(
            sessions, lease=self.settings.memory_extract_lease_seconds,
            limit=self.settings.memory_extract_batch_size)
        if not claimed:
            return
        try:
            vectors = self._retry(lambda: self.embedder.embed([c.content for c in claimed]))
        except BrainstreamError as exc:
            log.warning("summary embeddings postponed: %s: %s", exc.code, exc.message)
            return
        stats.summaries_embedded += self.work.store_summary_embeddings(
            list(zip(claimed, vectors, strict=True)))

    def _session(self, claim: ClaimedSession, stats: SummaryStats) -> None:
        error: str | None = None
        try:
            self._fold_all(claim, stats)
        except BrainstreamError as exc:  # retries exhausted (Unavailable) or refused
            error = f"{exc.code}: {exc.message}"
            self._dead_letter(claim, SummaryFailed(
                f"summarising failed after {MEMORY_RETRY_ATTEMPTS}"
                f" attempts: {error}"))
            stats.failed += 1
        except Exception as exc:
            # Unexpected (a database error): the session stays pending for the next run rather
            # than held by the lease until it runs out.
            self.work.release(claim, error=f"{type(exc).__name__}: {exc}", keep_pending=True)
            raise
        self.work.release(claim, error=error)

    def _fold_all(self, claim: ClaimedSession, stats: SummaryStats) -> None:
        window = self.settings.memory_window
        point = self.work.session_point(claim.session_pk)
        if point is None:
            return
        last_seq, summary_seq = point
        for step in fold_steps(last_seq - summary_seq, window,
                               SUMMARY_MAX_STEP):
            if not self._fold(claim, step, stats):
                return

    def _fold(self, claim: ClaimedSession, count: int, stats: SummaryStats) -> bool:
        """One step; False when the claim or the point moved under us (stop this session)."""
        got = self.work.fold_input(claim.session_pk, count)
        if got is None or not got.messages:
            return False
        to_seq = got.summary_seq + count
        lines = [f"{role}: {text}" for _, _, role, text in got.messages
                 if not is_chatter(text)]
        # Chatter alone leaves the text as it was; the new row still records the moved point
        # (its recent message), so a summary always says up to where it folds.
        content = got.previous
        if lines:
            content = self._retry(lambda: self.summariser.summarise(
                got.previous, lines, SUMMARY_BUDGET_TOKENS)).strip() \
                or got.previous
        vector = self._vector(content) if content else None
        recent = next((u for u, seq, _, _ in got.messages if seq == to_seq),
                      got.messages[-1][0])
        moved = self.work.move_point(claim, from_seq=got.summary_seq, to_seq=to_seq,
                                     recent_uuid=recent, content=content, vector=vector)
        if moved:
            stats.folds += 1
            stats.messages_folded += count
        return moved

    def _vector(self, text: str) -> Any:
        """The summary's vector, or None when the embedder is down (the summary is written
        anyway, `pending`, and `_embed_summaries` embeds it on a later run)."""
        try:
            return self._retry(lambda: self.embedder.embed([text]))[0]
        except BrainstreamError as exc:
            log.warning("summary written without its vector for now: %s", exc.message)
            return None

    def _retry(self, call: Callable[[], T]) -> T:
        return retry_transient(call, attempts=MEMORY_RETRY_ATTEMPTS,
                               max_wait=MEMORY_RETRY_MAX_WAIT,
                               on_retry=lambda n, exc: log.warning(
                                   "summariser attempt %d failed: %s", n, exc))

    def _dead_letter(self, claim: ClaimedSession, error: SummaryFailed) -> None:
        log.error("session %s: %s", claim.session_pk, error.message)
        if self.dead_letters is None:
            return
        value = json.dumps({"namespace": str(claim.namespace_id),
                            "session": str(claim.session_pk)}).encode()
        try:
            self.dead_letters.send([(str(claim.session_pk).encode(), value, dead_letter_headers(
                error, topic="memory.summary", partition=-1, offset=-1, event_id=None))])
        except Unavailable:
            log.error("dead-letter topic unavailable; the summary failure is only logged")
