"""Applying a run of object puts with set-based statements.

When the consumer catches up on a backlog, or a replay rebuilds a generation, a batch is mostly
puts of objects the database does not hold yet. Event by event, each costs a savepoint, a ledger
claim, a lock and an upsert (four round trips, and the statement triggers on `objects` once per
put). A run of consecutive first-class puts instead goes in one savepoint with one statement per
step: lock the objects that exist, claim the new ones in the ledger, upsert every row of every
claimed put, each row stamped with its own event's time.

What those statements do not cover goes event by event after the run, in its order, through
`apply_one` (the same code and the same outcome as before): a put the kind catalog refuses
(dead-lettered alone), a put of an object that exists (versions, stale parts, retitles,
revivals) unless the ledger already holds it (a duplicate). If a statement fails for a reason
of one event (a derived part id another namespace owns, a value Postgres refuses), the run's
savepoint is rolled back and every event of the run goes event by event, so a bad event is
still dead-lettered alone. A run never holds two events about one object, nor one ledger key
twice, so the order of one key's events is the order of the batch.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from pipeline.domain.errors import InvalidInput, Unavailable
from pipeline.domain.structure import has_structure
from pipeline.domain.write_model import ObjectWrite
from pipeline.ingest.objects import put_rows
from pipeline.ingest.records import Applying, RawRecord
from pipeline.outbox.ops import NODE_SYNC
from schemas.events import ObjectPut, ParsedEvent

log = logging.getLogger(__name__)

LedgerKey = tuple[uuid.UUID, str, str]  # namespace, source, event id


@dataclass(frozen=True)
class Consumed:
    """An event of the batch with what applying it needs from its record."""

    record: RawRecord
    event: ParsedEvent
    at: datetime | None  # the record's time: what the event's writes are stamped with
    privileged: bool  # signed by a privileged publisher key of its namespace


def ledger_key(event: ParsedEvent) -> LedgerKey:
    return (event.namespace, event.source, event.event_id)


@dataclass
class PutRun:
    """Consecutive first-class puts of a batch, gathered until an event that cannot join."""

    items: list[Consumed] = field(default_factory=list)
    _objects: set[uuid.UUID] = field(default_factory=set)
    _keys: set[LedgerKey] = field(default_factory=set)

    def admits(self, event: ParsedEvent) -> bool:
        """A put of a first-class object that no event of the run is about, under a ledger key
        no event of the run has."""
        payload = event.payload
        # a put with its own vector or structure goes event by event
        # (pipeline/ingest/objects.py)
        return (isinstance(payload, ObjectPut) and payload.parent_id is None
                and payload.vector is None and not has_structure(payload)
                and event.object_id is not None and event.object_id not in self._objects
                and ledger_key(event) not in self._keys)

    def add(self, item: Consumed) -> None:
        assert item.event.object_id is not None
        self.items.append(item)
        self._objects.add(item.event.object_id)
        self._keys.add(ledger_key(item.event))

    def take(self) -> list[Consumed]:
        """The run's events, in their order; the run is empty again."""
        items = self.items
        self.items, self._objects, self._keys = [], set(), set()
        return items


def _object_id(item: Consumed) -> uuid.UUID:
    assert item.event.object_id is not None  # a put's, given or derived
    return item.event.object_id


class _Refused(Exception):
    """A row of the run is another namespace's: the run goes event by event."""


def apply_puts(ctx: Applying, items: list[Consumed]) -> list[Consumed]:
    """Apply what the set-based statements cover (new objects; duplicates counted); the events
    left to apply one by one, in their order. Raises `Unavailable` (the batch is retried)."""
    store, outcome = ctx.store, ctx.outcome
    writes: dict[int, list[ObjectWrite]] = {}
    for n, item in enumerate(items):
        payload = item.event.payload
        assert isinstance(payload, ObjectPut)
        try:
            ctx.catalog.validate_put(payload.kind, payload.properties)
        except InvalidInput:
            continue  # apply_one refuses it again, alone
        writes[n] = put_rows(ctx, item.event, payload, item.at)
    if not writes:
        return items
    store.set_event_time(None)  # every row carries its event's time
    try:
        with store.savepoint():
            heads = store.lock_objects([_object_id(items[n]) for n in writes])
            new = [n for n in writes if _object_id(items[n]) not in heads]
            existing = [n for n in writes if _object_id(items[n]) in heads]
            claimed = store.claim_events([(e.namespace, e.source, e.event_id, e.type) for e in
                                          (items[n].event for n in new)])
            applied = [n for n in new if ledger_key(items[n].event) in claimed]
            if store.upsert_objects([row for n in applied for row in writes[n]]):
                raise _Refused()
            store.record_object_versions([(_object_id(items[n]), "put", items[n].event.event_id,
                                           items[n].event.version) for n in applied])
            for n in applied:
                store.enqueue(items[n].event.namespace, _object_id(items[n]), NODE_SYNC)
            # an existing object's put is applied event by event, unless it is a duplicate
            seen = store.processed([ledger_key(items[n].event) for n in existing]) \
                if existing else set()
    except Unavailable:
        raise
    except (_Refused, InvalidInput):
        return items
    except Exception:
        log.exception("the set-based apply of %d puts failed; applying them one by one",
                      len(items))
        return items
    outcome.applied += len(applied)
    outcome.duplicates += len(new) - len(applied)
    outcome.duplicates += sum(ledger_key(items[n].event) in seen for n in existing)
    outcome.outbox_rows += len(applied)
    outcome.embed_roots.update(_object_id(items[n]) for n in applied)
    done = set(new) | {n for n in existing if ledger_key(items[n].event) in seen}
    return [item for n, item in enumerate(items) if n not in done]
