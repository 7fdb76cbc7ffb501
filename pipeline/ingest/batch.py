"""Applying a batch of Kafka records through the write path's port, `EventStore`.

One batch is one transaction; each event runs in a savepoint so a bad event is dead-lettered
without undoing its neighbours. What the graph must do is written to the outbox in the same
transaction; what must be embedded is left `pending` and named in the outcome so the caller can
trigger the workers after commit (a lost trigger is found by the periodic sweep).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pipeline.domain.errors import InvalidInput
from pipeline.ingest.apply import apply_one
from pipeline.ingest.deferred import Defer, park, retry_deferred
from pipeline.ingest.records import Applying, BatchOutcome, DeadLetter, IngestOptions, RawRecord
from pipeline.kafka.markers import read_marker
from pipeline.ports import EventStore
from schemas.events import parse_event


def apply_batch(store: EventStore, records: Sequence[RawRecord],
                options: IngestOptions) -> BatchOutcome:
    """Apply records in order inside the store's transaction, then retry due deferred events;
    never raises for a bad event."""
    outcome = BatchOutcome()
    ctx = Applying(store, store.load_catalog(), options, outcome)
    for record in records:
        try:
            if read_marker(record.value, record.headers) is not None:
                outcome.markers += 1  # a replay's position mark, not an event
                continue
            event = parse_event(record.value, max_bytes=options.max_event_bytes)
            at = record.time
        except InvalidInput as exc:  # a forged marker, a bad event or record timestamp
            outcome.dead.append(DeadLetter(record, exc))
            continue
        refused = options.publisher_keys.refusal(event.namespace, record.key, record.headers,
                                                 record.value)
        if refused is not None:  # before the ledger: a forged event id claims nothing
            outcome.dead.append(DeadLetter(record, refused, event.event_id))
            continue
        store.set_event_time(at)
        privileged = options.publisher_keys.is_privileged(event.namespace, record.key,
                                                          record.headers, record.value)
        try:
            error = apply_one(replace(ctx, privileged=True) if privileged else ctx, event)
        except Defer as wait:
            error = park(ctx, event, record, wait)
        if error is not None:
            outcome.dead.append(DeadLetter(record, error, event.event_id))
    store.set_event_time(None)  # a deferred event applies now, at the transaction's time
    retry_deferred(ctx, apply_one)
    store.flush()  # the outbox rows of the events applied, before the caller commits
    return outcome
