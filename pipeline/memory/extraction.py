"""The message extractors: durable consumers of committed messages, never fire-and-forget.

Each message gets one state row per extractor (`token`, `embed`, `entities`) in the transaction that
adds it; this service claims pending rows with a lease, computes, and writes the result back by
compare-and-set (the `MessageWork` port, `pipeline/memory/store/work.py`). So each
extractor is idempotent per message uuid: a redelivered task finds the rows done, a killed worker's
rows are claimed again once its lease runs out, and a slow worker whose lease expired writes
nothing.

- token: the approximate token count of the content (`pipeline/domain/chunking.py: count_tokens`);
- embed: the pipeline's embedder, the same model as the objects', over the message after the
  turns before it in its session (`ContextRule.dense_text`: `dense_turns`; a dense text this
  model already embedded in the namespace takes the stored vector); the lexemes of
  the message after its `lexical_turns` turns before, dated (`ContextRule.lexical_text`:
  `date`), go to `context_lexical`, which lexical
  search reads (a reply is found by the words of the question it answers, a turn by the month
  it was said in);
- entities: mentions with character spans of the content, stored as
  `metadata.system.entities = [{name, label, matches: [{start, end, text}]}]`.

Transient failures (`Unavailable`) are retried by the one policy (`pipeline/domain/retry.py`); what
exhausts it, or a message the extractor refuses (alone, without the turns before it: a refused turn
must not fail its reply too), is marked failed and dead-lettered with `extractor_failed`, and the
other messages of the batch go on.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pipeline.domain.chunking import count_tokens
from pipeline.domain.errors import BrainstreamError, Unavailable
from pipeline.domain.index_text import embedder_text, text_hash
from pipeline.domain.memory_errors import ExtractorFailed
from pipeline.domain.memory_model import EMBED_EXTRACTOR, ENTITIES_EXTRACTOR, TOKEN_EXTRACTOR
from pipeline.domain.memory_values import ClaimedMessage, ContextRule, MessageIndex
from pipeline.domain.mentions import Extraction, TextField
from pipeline.domain.retry import give_up_error, isolate_refused
from pipeline.embedding.identity import EMBED_TEXT_CAP_CHARS
from pipeline.embedding.reuse import VectorReuse, stored_or_embedded
from pipeline.entities.extractors import build_extractor
from pipeline.entities.names import normalise
from pipeline.entities.settings import EntitySettings
from pipeline.kafka.io import dead_letter_headers
from pipeline.memory.ports import MessageWork
from pipeline.memory.settings import MEMORY_RETRY_ATTEMPTS, MEMORY_RETRY_MAX_WAIT, MemorySettings
from pipeline.ports import DeadLetterSink, Embedder, Extractor

log = logging.getLogger(__name__)
Compute = Callable[[Sequence[ClaimedMessage]], list[Any]]


def message_extractor(settings: EntitySettings) -> Extractor:
    """The entity extractor of messages: the entity layer's (`ENTITY_EXTRACTOR`)."""
    return build_extractor(settings)


@dataclass
class ExtractStats:
    stored: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    reused: int = 0  # dense texts given a stored vector instead of a model call


class MessageExtraction:
    """Runs every message extractor over the pending messages of some sessions (or all)."""

    def __init__(self, settings: MemorySettings, work: MessageWork, embedder: Embedder,
                 entities: Extractor, dead_letters: DeadLetterSink | None = None, *,
                 reuse: VectorReuse | None = None) -> None:
        self.settings = settings
        self.work = work
        self.dead_letters = dead_letters
        self.embedder = embedder
        self.reuse = reuse or VectorReuse.of(embedder)
        # the rule's defaults: chosen on a LoCoMo dev conversation (docs/memory.md); a change
        # applies to messages extracted from then on, so it is a release's, not a setting
        self.context = ContextRule()
        self.extractors: dict[str, Compute] = {
            TOKEN_EXTRACTOR: lambda rows: [count_tokens(r.content) for r in rows],
            EMBED_EXTRACTOR: self._index,
            ENTITIES_EXTRACTOR: lambda rows: [_entities(x) for x in entities.extract(
                [[TextField("content", r.content)] for r in rows])],
        }
        self.reused = 0

    def _index(self, rows: Sequence[ClaimedMessage]) -> list[MessageIndex]:
        """Each message's dense vector (stored, or embedded) and lexical text."""
        rule, model = self.context, self.reuse.model
        texts = [embedder_text(rule.dense_text(r), cap_chars=EMBED_TEXT_CAP_CHARS) for r in rows]
        keys = [(r.namespace_id, text_hash(text)) for r, text in zip(rows, texts, strict=True)]
        found = self.work.find_vectors(self.reuse, keys)
        vectors = stored_or_embedded(self.embedder, texts, keys, found)
        self.reused += sum(key in found for key in keys)
        return [MessageIndex(vector, rule.lexical_text(r), key[1], model)
                for r, key, vector in zip(rows, keys, vectors, strict=True)]

    def run(self, sessions: Sequence[uuid.UUID] | None = None, *,
            max_batches: int = 1000) -> ExtractStats:
        """Each extractor in turn, batch after batch, until nothing of theirs is pending."""
        stats = ExtractStats()
        for name, compute in self.extractors.items():
            for _ in range(max_batches):
                claimed = self.work.claim_messages(
                    name, sessions, lease=self.settings.memory_extract_lease_seconds,
                    limit=self.settings.memory_extract_batch_size,
                    context_turns=self.context.turns if name == EMBED_EXTRACTOR else 0)
                if not claimed:
                    break
                self._batch(name, compute, claimed, stats)
        stats.reused, self.reused = self.reused, 0
        return stats

    def _batch(self, name: str, compute: Compute, rows: Sequence[ClaimedMessage],
               stats: ExtractStats) -> None:
        """Compute and store; a refused batch is halved until each refused message is alone,
        which is tried once more without the turns before it (they may be what was refused: a
        refused turn must not fail its reply too)."""
        attempts = MEMORY_RETRY_ATTEMPTS

        def store(batch: Sequence[ClaimedMessage], values: list[Any]) -> None:
            stored = self.work.write_results(name, list(zip(batch, values, strict=True)))
            stats.stored[name] = stats.stored.get(name, 0) + stored

        def fail(batch: Sequence[ClaimedMessage], exc: BrainstreamError) -> None:
            self._fail(name, batch, give_up_error(
                exc, ExtractorFailed, attempts=attempts, what=f"{name} extractor",
                refused=f"the {name} extractor refused this message"), stats)

        isolate_refused(
            rows, compute, store=store, fail=fail, attempts=attempts,
            max_wait=MEMORY_RETRY_MAX_WAIT,
            on_retry=lambda n, exc: log.warning("%s extractor attempt %d failed: %s", name, n,
                                                exc),
            lighter=lambda row: replace(row, previous=()) if row.previous else None)

    def _fail(self, name: str, rows: Sequence[ClaimedMessage], error: ExtractorFailed,
              stats: ExtractStats) -> None:
        """Dead-letter the reason, then mark the rows failed (if the dead-letter topic is down
        they stay pending and are tried again when their lease runs out)."""
        log.error("%s (%d messages)", error.message, len(rows))
        if self.dead_letters is not None:
            letters = [(str(r.session_pk).encode(), json.dumps({
                "namespace": str(r.namespace_id), "message_uuid": str(r.message_uuid),
                "session": str(r.session_pk), "extractor": name}).encode(),
                dead_letter_headers(error, topic=f"memory.{name}", partition=-1, offset=-1,
                                    event_id=r.event_id)) for r in rows]
            try:
                self.dead_letters.send(letters)
            except Unavailable:
                log.error("dead-letter topic unavailable; leaving the messages pending")
                return
        self.work.mark_failed(name, rows, error.message)
        stats.failed[name] = stats.failed.get(name, 0) + len(rows)


def _entities(extraction: Extraction) -> list[dict[str, Any]]:
    """Mentions grouped by entity, Zep-style: one entry per normalised name (`norm`, the key
    the entity layer stores it under) with its first surface name and every span of it."""
    grouped: dict[tuple[str, str], dict[str, Any]] = {}
    for m in extraction.mentions:
        entry = grouped.setdefault((normalise(m.name), m.label), {
            "name": m.name, "norm": normalise(m.name), "label": m.label, "matches": []})
        entry["matches"].append({"start": m.start, "end": m.end, "text": m.text})
    return list(grouped.values())
