"""Events that cannot apply yet: the deferral, parking, and retrying the ones that are due.

Puts and links are keyed differently, so a link may be consumed before the put of an endpoint
(they sit on different partitions). Such an event waits in `deferred_events`, retried with a
back-off until `defer_seconds` have passed, then dead-lettered with the reason it waited for.
Later events about the same link queue behind it (the wait key), so their order holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pipeline.domain.errors import BrainstreamError, InvalidInput
from pipeline.domain.retry import backoff_seconds
from pipeline.ingest.records import Applying, DeadLetter, RawRecord
from schemas.events import ParsedEvent, parse_event

# Applies one event (`pipeline.ingest.apply.apply_one`): None when done, the error when rejected.
ApplyOne = Callable[[Applying, ParsedEvent], BrainstreamError | None]


class Defer(Exception):
    """The event cannot apply yet (an endpoint's put has not been consumed); it waits, under
    `wait_key`, in deferred_events."""

    def __init__(self, error: InvalidInput, wait_key: str) -> None:
        super().__init__(error.message)
        self.error = error
        self.wait_key = wait_key


def park(ctx: Applying, event: ParsedEvent, record: RawRecord,
         wait: Defer) -> InvalidInput | None:
    """Keep the event until what it waits for arrives (a redelivery is parked once). None:
    parked; an error: the store refused to keep it (e.g. a NUL in a header key), so it is
    rejected for good (dead-letter it) and the rest of the batch goes on."""
    try:
        with ctx.store.savepoint():
            ctx.store.defer(namespace=event.namespace, source=event.source,
                            event_id=event.event_id, wait_key=wait.wait_key, topic=record.topic,
                            partition=record.partition, offset=record.offset, key=record.key,
                            value=record.value, headers=record.headers, code=wait.error.code,
                            reason=wait.error.message, field=wait.error.field,
                            record_time=record.time)
    except InvalidInput as exc:
        return exc
    ctx.outcome.deferred += 1
    return None


def retry_deferred(ctx: Applying, apply: ApplyOne) -> None:
    """Apply deferred events that are due, oldest first; past `defer_seconds` they are
    dead-lettered with the reason they waited for."""
    store, outcome = ctx.store, ctx.outcome
    for row in store.due_deferred(ctx.options.deferred_per_batch):
        if store.is_waiting(row.wait_key, before=row.id):
            continue  # an earlier event about the same thing still waits: keep the order
        record = RawRecord(row.topic, row.partition, row.offset, row.key, row.value, row.headers)
        event_id: str | None = None
        error: BrainstreamError | None
        # stamped with its record's time, as when it applies at once (a replay): the same history
        store.set_event_time(row.record_time)
        try:
            event = parse_event(row.value, max_bytes=ctx.options.max_event_bytes)
            event_id = event.event_id
            error = apply(replace(ctx, waiting_ok=row.wait_key), event)
        except Defer as wait:
            if row.age_seconds < ctx.options.defer_seconds:
                store.postpone_deferred(row.id, backoff_seconds(row.attempts + 1, cap=30.0))
                continue
            error = wait.error
        except InvalidInput as exc:
            error = exc
        if error is not None:
            outcome.dead.append(DeadLetter(record, error, event_id))
        store.drop_deferred(row.id)
