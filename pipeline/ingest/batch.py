"""Applying a batch of Kafka records through the write path's port, `EventStore`.

One batch is one transaction; each event runs in a savepoint so a bad event is dead-lettered
without undoing its neighbours (a run of consecutive puts shares one, falling back to one per
event when one of them is refused: pipeline/ingest/bulk.py). What the graph must do is written
to the outbox in the same transaction; what must be embedded is left `pending` and named in the
outcome so the caller can trigger the workers after commit (a lost trigger is found by the
periodic sweep).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pipeline.domain.errors import InvalidInput
from pipeline.ingest.apply import apply_one
from pipeline.ingest.bulk import Consumed, PutRun, apply_puts
from pipeline.ingest.deferred import Defer, park, retry_deferred
from pipeline.ingest.records import Applying, BatchOutcome, DeadLetter, IngestOptions, RawRecord
from pipeline.kafka.markers import read_marker
from pipeline.ports import EventStore
from schemas.events import parse_event


def apply_batch(store: EventStore, records: Sequence[RawRecord],
                options: IngestOptions) -> BatchOutcome:
    """Apply records in order inside the store's transaction, then retry due deferred events;
    never raises for a bad event. Consecutive puts of first-class objects go together
    (`pipeline/ingest/bulk.py`); every other event in its own savepoint."""
    outcome = BatchOutcome()
    ctx = Applying(store, store.load_catalog(), options, outcome)
    run = PutRun()
    for record in records:
        try:
            if read_marker(record.value, record.headers) is not None:
                outcome.markers += 1  # a replay's position mark, not an event
                continue
            event = parse_event(record.value, max_bytes=options.max_event_bytes)
            at = record.time
        except InvalidInput as exc:  # a forged marker, a bad event or record timestamp
            _apply_run(ctx, run.take())  # dead letters stay in the order of their records
            outcome.dead.append(DeadLetter(record, exc))
            continue
        refused = options.publisher_keys.refusal(event.namespace, record.key, record.headers,
                                                 record.value)
        if refused is not None:  # before the ledger: a forged event id claims nothing
            _apply_run(ctx, run.take())
            outcome.dead.append(DeadLetter(record, refused, event.event_id))
            continue
        privileged = options.publisher_keys.is_privileged(event.namespace, record.key,
                                                          record.headers, record.value)
        item = Consumed(record, event, at, privileged)
        if not run.admits(event):  # the run is complete: apply it before this event
            _apply_run(ctx, run.take())
        if run.admits(event):
            run.add(item)
        else:
            _apply_one(ctx, item)
    _apply_run(ctx, run.take())
    store.set_event_time(None)  # a deferred event applies at its own record's time (retry_deferred)
    retry_deferred(ctx, apply_one)
    store.flush()  # the outbox rows of the events applied, before the caller commits
    return outcome


def _apply_run(ctx: Applying, items: list[Consumed]) -> None:
    """A run of puts: together what can go together, the rest one by one, in their order."""
    left = apply_puts(ctx, items) if len(items) >= ctx.options.min_run else items
    for item in left:
        _apply_one(ctx, item)


def _apply_one(ctx: Applying, item: Consumed) -> None:
    """One event in its own savepoint, stamped with its record's time; a rejected one is
    dead-lettered, one that cannot apply yet is parked."""
    ctx.store.set_event_time(item.at)
    try:
        error = apply_one(replace(ctx, privileged=True) if item.privileged else ctx, item.event)
    except Defer as wait:
        error = park(ctx, item.event, item.record, wait)
    if error is not None:
        ctx.outcome.dead.append(DeadLetter(item.record, error, item.event.event_id))
