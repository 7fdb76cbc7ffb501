"""The consumer's batch loop body: apply a batch durably, dead-letter the bad, trigger the workers.

Nothing acknowledged is lost: the caller acknowledges the batch only after `process` returns,
which happens only once the Postgres transaction committed and every dead letter was acknowledged
by the broker. Transient failures are retried here, with backoff, for as long as it takes up to
`give_up_after`; past that `process` raises `ConsumerStuck` and the caller must end the process
without acknowledging (the batch is then redelivered to whoever takes over the partition).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from pipeline.domain.errors import Unavailable
from pipeline.domain.retry import backoff_seconds
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import BatchOutcome, RawRecord, ingest_options
from pipeline.ingest.settings import IngestSettings
from pipeline.kafka.io import dead_letter_headers
from pipeline.metrics import instruments as metrics
from pipeline.ports import DeadLetterSink, EventStores, WorkTrigger

log = logging.getLogger(__name__)


class ConsumerStuck(Exception):
    """A batch could not be made durable in time; the process must exit without acking."""


class BatchProcessor:
    """Applies consumed batches to Postgres exactly once in effect."""

    def __init__(self, settings: IngestSettings, stores: EventStores, dead_letters: DeadLetterSink,
                 trigger: WorkTrigger, *, give_up_after: float = 600.0) -> None:
        self.options = ingest_options(settings)
        self.stores = stores
        self.dead_letters = dead_letters
        self.trigger = trigger
        self.give_up_after = give_up_after

    def process(self, records: Sequence[RawRecord]) -> BatchOutcome:
        """Make the batch durable (retrying transient failures), then trigger the workers."""
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                outcome = self._attempt(records)
                break
            except Unavailable as exc:  # the store or the dead-letter topic cannot be reached
                if time.monotonic() - started > self.give_up_after:
                    raise ConsumerStuck(f"batch not durable after {attempt} attempts: {exc}") \
                        from exc
                delay = backoff_seconds(attempt, cap=10.0)
                log.warning("batch attempt %d failed (%s); retrying in %.1fs", attempt, exc,
                            delay)
                time.sleep(delay)
        metrics.BATCH_SECONDS.observe(time.monotonic() - started)
        _count(outcome)
        self._trigger(outcome)
        return outcome

    def _attempt(self, records: Sequence[RawRecord]) -> BatchOutcome:
        with self.stores.transaction() as store:
            outcome = apply_batch(store, records, self.options)
            # Dead letters are acknowledged before the commit: a crash in between re-applies the
            # batch (a duplicate dead letter at worst), never loses one.
            # (the writer cuts a letter the broker would refuse: key, headers and value together)
            letters = [(d.record.key, d.record.value, dead_letter_headers(
                d.error, topic=d.record.topic, partition=d.record.partition,
                offset=d.record.offset, event_id=d.event_id, original=d.record.headers))
                for d in outcome.dead]
            self.dead_letters.send(letters)
        return outcome

    def retry_due_deferred(self) -> int:
        """Apply the deferred events that are due, if any (between batches: the sweep); how many
        were applied."""
        return self.process([]).applied if self.stores.deferred_due() else 0

    def _trigger(self, outcome: BatchOutcome) -> None:
        try:
            if outcome.embed_roots:
                self.trigger.embed(sorted(outcome.embed_roots))
                # The roots whose text was written are the ones whose extraction is pending;
                # the worker extracts them off the consumer's path.
                self.trigger.extract(sorted(outcome.embed_roots))
            elif outcome.entity_decisions:
                # the extraction round applies recorded decisions whose entities exist
                self.trigger.extract([])
            if outcome.outbox_rows:
                self.trigger.relay()
            if outcome.memory_sessions:
                self.trigger.memory(sorted(outcome.memory_sessions))
        except Exception as exc:  # the sweep will find the work; ingestion must not stop
            log.warning("could not trigger workers (%s); the sweep will pick the work up", exc)


def _count(outcome: BatchOutcome) -> None:
    for name, value in (("applied", outcome.applied), ("duplicate", outcome.duplicates),
                        ("stale", outcome.stale), ("deferred", outcome.deferred),
                        ("dead_lettered", len(outcome.dead)), ("marker", outcome.markers)):
        if value:
            metrics.EVENTS.labels(name).inc(value)
    for letter in outcome.dead:
        metrics.DEAD_LETTERS.labels(letter.error.code).inc()

