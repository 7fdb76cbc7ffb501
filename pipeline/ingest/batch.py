"""Applying a batch of Kafka records to Postgres: the decisions of the write path.

One batch is one transaction; each event runs in a savepoint so a bad event is dead-lettered
without undoing its neighbours. What the graph must do is written to the outbox in the same
transaction; what must be embedded is left `pending` and named in the outcome so the caller can
trigger the workers after commit (a lost trigger is found by the periodic sweep).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import psycopg

from pipeline.domain.chunking import chunk_text, part_id
from pipeline.domain.errors import (
    BrainstreamError,
    IdConflict,
    InvalidInput,
    LinkEndpointDeleted,
    LinkEndpointIsPart,
    LinkEndpointNotFound,
    LinkNotFound,
    ObjectNotFound,
    ParentIsPart,
    ParentNotFound,
    RejectedByDatabase,
)
from pipeline.domain.index_text import entity_index_text, part_index_text, text_hash
from pipeline.domain.kinds import KindCatalog
from pipeline.domain.retry import backoff_seconds
from pipeline.domain.write_model import ObjectHead, ObjectWrite
from pipeline.kafka.markers import is_marker
from pipeline.outbox.ops import EDGE_SYNC, NODE_SYNC, edge_payload
from pipeline.stores.postgres.events import PgEventStore
from schemas.events import (
    LinkDelete,
    LinkPut,
    ObjectPut,
    ObjectSoftDelete,
    ParsedEvent,
    parse_event,
)

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class RawRecord:
    """A Kafka record as consumed: enough to dead-letter it faithfully."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()
    # the record's Kafka timestamp (ms since the epoch): what its writes are stamped with, so a
    # replay reproduces created_at / updated_at / deleted_at; None: the transaction's time
    timestamp_ms: int | None = None

    @property
    def time(self) -> datetime | None:
        if self.timestamp_ms is None or self.timestamp_ms < 0:
            return None
        return datetime.fromtimestamp(self.timestamp_ms / 1000.0, tz=UTC)


@dataclass(frozen=True)
class DeadLetter:
    record: RawRecord
    error: BrainstreamError
    event_id: str | None = None


@dataclass
class BatchOutcome:
    applied: int = 0
    duplicates: int = 0
    stale: int = 0
    deferred: int = 0
    dead: list[DeadLetter] = field(default_factory=list)
    embed_roots: set[uuid.UUID] = field(default_factory=set)
    outbox_rows: int = 0
    markers: int = 0  # replay markers: skipped, never dead-lettered


@dataclass(frozen=True)
class IngestOptions:
    max_event_bytes: int = 1_000_000
    chunk_max_tokens: int = 200
    chunk_overlap_tokens: int = 30
    content_cap_chars: int = 2000
    defer_seconds: float = 300.0
    deferred_per_batch: int = 200


class _Stale(Exception):
    """An older event (by `version`) about an object that moved on: a no-op."""


class _Defer(Exception):
    """The event cannot apply yet (an endpoint's put has not been consumed: puts and links are
    keyed differently, so they may sit on different partitions). It waits in deferred_events."""

    def __init__(self, error: InvalidInput, wait_key: str) -> None:
        super().__init__(error.message)
        self.error = error
        self.wait_key = wait_key


def apply_batch(store: PgEventStore, records: Sequence[RawRecord],
                options: IngestOptions) -> BatchOutcome:
    """Apply records in order inside the store's transaction, then retry due deferred events;
    never raises for a bad event."""
    outcome = BatchOutcome()
    catalog = store.load_catalog()
    for record in records:
        if is_marker(record.value, record.headers):
            outcome.markers += 1  # a replay's position mark, not an event
            continue
        try:
            event = parse_event(record.value, max_bytes=options.max_event_bytes)
        except InvalidInput as exc:
            outcome.dead.append(DeadLetter(record, exc))
            continue
        store.set_event_time(record.time)
        try:
            _apply_one(store, catalog, event, options, outcome)
        except _Defer as wait:
            store.defer(namespace=event.namespace, source=event.source, event_id=event.event_id,
                        wait_key=wait.wait_key, topic=record.topic, partition=record.partition,
                        offset=record.offset, key=record.key, value=record.value,
                        headers=record.headers, code=wait.error.code, reason=wait.error.message,
                        field=wait.error.field)
            outcome.deferred += 1
        except _Failed as failed:
            outcome.dead.append(DeadLetter(record, failed.error, event.event_id))
    store.set_event_time(None)  # a deferred event applies now, at the transaction's time
    retry_deferred(store, catalog, options, outcome)
    return outcome


def retry_deferred(store: PgEventStore, catalog: KindCatalog, options: IngestOptions,
                   outcome: BatchOutcome) -> None:
    """Apply deferred events that are due, oldest first; past `defer_seconds` they are
    dead-lettered with the reason they waited for."""
    for row in store.due_deferred(options.deferred_per_batch):
        if store.is_waiting(row.wait_key, before=row.id):
            continue  # an earlier event about the same thing still waits: keep the order
        record = RawRecord(row.topic, row.partition, row.offset, row.key, row.value, row.headers)
        event_id: str | None = None
        try:
            event = parse_event(row.value, max_bytes=options.max_event_bytes)
            event_id = event.event_id
            _apply_one(store, catalog, event, options, outcome, waiting_ok=row.wait_key)
        except _Defer as wait:
            if row.age_seconds < options.defer_seconds:
                store.postpone_deferred(row.id, backoff_seconds(row.attempts + 1, cap=30.0))
                continue
            outcome.dead.append(DeadLetter(record, wait.error, event_id))
        except _Failed as failed:
            outcome.dead.append(DeadLetter(record, failed.error, event_id))
        except InvalidInput as exc:
            outcome.dead.append(DeadLetter(record, exc, event_id))
        store.drop_deferred(row.id)


class _Failed(Exception):
    """The event is rejected for good; it goes to the dead-letter topic."""

    def __init__(self, error: BrainstreamError) -> None:
        super().__init__(error.message)
        self.error = error


def _apply_one(store: PgEventStore, catalog: KindCatalog, event: ParsedEvent,
               options: IngestOptions, outcome: BatchOutcome, *,
               waiting_ok: str | None = None) -> None:
    """One event in its own savepoint: applied, a duplicate or stale; or it raises _Defer (not
    yet) or _Failed (never), with its writes undone."""
    try:
        with store.savepoint():
            if not store.claim_event(event.namespace, event.source, event.event_id,
                                     event.type):
                outcome.duplicates += 1
                return
            try:
                _apply_event(store, catalog, event, options, outcome, waiting_ok)
            except _Stale:
                store.set_outcome(event.namespace, event.source, event.event_id, "stale")
                outcome.stale += 1
                return
        outcome.applied += 1
    except _Defer:
        raise
    except InvalidInput as exc:
        raise _Failed(exc) from exc
    except psycopg.DataError as exc:
        # Postgres refused a value the schema let through; the event, not the batch, is bad.
        raise _Failed(RejectedByDatabase(f"{type(exc).__name__}: {exc}")) from exc
    except psycopg.OperationalError:
        raise  # the database is unreachable: retry the whole batch
    except Exception as exc:
        # A bug must not lose the event: dead-letter it so it can be re-driven after a fix.
        log.exception("unexpected error applying event %s", event.event_id)
        raise _Failed(BrainstreamError(f"{type(exc).__name__}: {exc}")) from exc


def _apply_event(store: PgEventStore, catalog: KindCatalog, event: ParsedEvent,
                 options: IngestOptions, outcome: BatchOutcome, waiting_ok: str | None) -> None:
    payload = event.payload
    if isinstance(payload, ObjectPut):
        _put(store, catalog, event, payload, options, outcome)
    elif isinstance(payload, ObjectSoftDelete):
        _soft_delete(store, event, payload, outcome)
    else:
        key = f"link:{payload.from_id}:{payload.relation_type}:{payload.to_id}"
        if key != waiting_ok and store.is_waiting(key):
            raise _Defer(InvalidInput("an earlier event about this link is still waiting for "
                                      "its endpoints", field="data"), key)
        if isinstance(payload, LinkPut):
            _link_put(store, event, payload, outcome, key)
        else:
            _link_delete(store, event, payload, outcome)


def _check_version(existing_version: int | None, version: int | None) -> None:
    if version is not None and existing_version is not None and version < existing_version:
        raise _Stale()


def _owned(head: ObjectHead | None, namespace: uuid.UUID) -> ObjectHead | None:
    """The row if it belongs to `namespace`; a row of another namespace is a conflict."""
    if head is not None and head.namespace_id != namespace:
        raise IdConflict("this object id is already used by another namespace", field="data.id")
    return head


def _put(store: PgEventStore, catalog: KindCatalog, event: ParsedEvent, put: ObjectPut,
         options: IngestOptions, outcome: BatchOutcome) -> None:
    assert event.object_id is not None
    object_id = event.object_id
    catalog.validate_put(put.kind, put.properties)
    if put.parent_id is not None:
        _put_part(store, event, put, object_id, outcome)
        return
    head = _owned(store.lock_object(object_id), event.namespace)
    if head is not None:
        _check_version(head.source_version, event.version)
        if head.parent_id is not None:
            raise InvalidInput("this id belongs to a part; a part is put with its parent_id",
                               field="data.parent_id")
    index_text = entity_index_text(put.title, put.summary, put.properties, put.content,
                                   content_cap_chars=options.content_cap_chars)
    rows = [ObjectWrite(
        id=object_id, namespace_id=event.namespace, kind=put.kind, title=put.title,
        summary=put.summary, properties=dict(put.properties), content=put.content,
        content_type=put.content_type, parent_id=None, position=None,
        index_text_hash=text_hash(index_text), source_version=event.version,
        event_id=event.event_id,
    )]
    spec = catalog.get(put.kind)
    chunked = bool(put.content and put.content.strip()) and (catalog.is_open or
                                                              (spec is not None and spec.is_parent))
    chunks = chunk_text(put.content or "", max_tokens=options.chunk_max_tokens,
                        overlap_tokens=options.chunk_overlap_tokens) if chunked else []
    for chunk in chunks:
        rows.append(ObjectWrite(
            id=part_id(object_id, chunk.position), namespace_id=event.namespace, kind=put.kind,
            title=None, summary=None, properties={}, content=chunk.text,
            content_type=put.content_type, parent_id=object_id, position=chunk.position,
            index_text_hash=text_hash(part_index_text(put.title, chunk.text)),
            source_version=None, event_id=event.event_id, chunked=True,
            context_title=put.title,
        ))
    # Chunked parts past the new end are stale; explicit parts stay as sent.
    stale = [pid for pid, pos in store.chunked_parts_of(object_id) if pos >= len(chunks)]
    store.delete_rows(stale)
    store.upsert_objects(rows)
    if head is not None and head.deleted_at is not None:
        store.revive_parts(object_id, head.deleted_at)
    # The embed worker writes the node once the object is embedded; an object whose index text
    # did not change is synced now (its other fields may have).
    outcome.embed_roots.add(object_id)
    store.enqueue(event.namespace, object_id, NODE_SYNC)
    outcome.outbox_rows += 1


def _put_part(store: PgEventStore, event: ParsedEvent, put: ObjectPut, object_id: uuid.UUID,
              outcome: BatchOutcome) -> None:
    assert put.parent_id is not None
    parents = store.share_objects([put.parent_id])
    parent = parents.get(put.parent_id)
    if parent is None or parent.namespace_id != event.namespace or parent.deleted_at is not None:
        raise ParentNotFound("the parent is missing, deleted or in another namespace",
                             field="data.parent_id")
    if parent.parent_id is not None:
        raise ParentIsPart("the parent is itself a part", field="data.parent_id")
    head = _owned(store.lock_object(object_id), event.namespace)
    if head is not None:
        _check_version(head.source_version, event.version)
    store.upsert_objects([ObjectWrite(
        id=object_id, namespace_id=event.namespace, kind=put.kind, title=put.title,
        summary=put.summary, properties=dict(put.properties), content=put.content,
        content_type=put.content_type, parent_id=put.parent_id, position=put.position,
        index_text_hash=text_hash(part_index_text(parent.title, put.content or "")),
        source_version=event.version, event_id=event.event_id, context_title=parent.title,
    )])
    outcome.embed_roots.add(put.parent_id)
    store.enqueue(event.namespace, put.parent_id, NODE_SYNC)
    outcome.outbox_rows += 1


def _soft_delete(store: PgEventStore, event: ParsedEvent, delete: ObjectSoftDelete,
                 outcome: BatchOutcome) -> None:
    head = store.lock_object(delete.id)
    if head is None or head.namespace_id != event.namespace:
        raise ObjectNotFound("no such object in this namespace", field="data.id")
    _check_version(head.source_version, event.version)
    store.soft_delete_object(delete.id, event.version, event.event_id)
    root = head.parent_id or delete.id
    store.enqueue(event.namespace, root, NODE_SYNC)
    outcome.outbox_rows += 1


def _endpoints_ok(store: PgEventStore, namespace: uuid.UUID, ids: Sequence[uuid.UUID],
                  wait_key: str) -> None:
    heads = store.share_objects(ids)
    for name, oid in zip(("data.from", "data.to"), ids, strict=True):
        head = heads.get(oid)
        if head is None:
            # its put may still be on its way on another partition: wait for it, bounded
            raise _Defer(LinkEndpointNotFound(f"{name} names no object in this namespace",
                                              field=name), wait_key)
        if head.namespace_id != namespace:
            raise LinkEndpointNotFound(f"{name} names no object in this namespace", field=name)
        if head.deleted_at is not None:
            raise LinkEndpointDeleted(f"{name} names a deleted object", field=name)
        if head.parent_id is not None:
            raise LinkEndpointIsPart(f"{name} names a part; link first-class objects",
                                     field=name)


def _link_put(store: PgEventStore, event: ParsedEvent, link: LinkPut,
              outcome: BatchOutcome, wait_key: str) -> None:
    _endpoints_ok(store, event.namespace, [link.from_id, link.to_id], wait_key)
    head = store.lock_link(link.from_id, link.relation_type, link.to_id)
    if head is not None:
        _check_version(head.source_version, event.version)
    meta = link.meta.model_dump(mode="json")
    store.upsert_link(event.namespace, link.from_id, link.relation_type, link.to_id, meta,
                      event.version, event.event_id)
    store.enqueue(event.namespace, link.from_id, EDGE_SYNC,
                  edge_payload(link.from_id, link.relation_type, link.to_id))
    outcome.outbox_rows += 1


def _link_delete(store: PgEventStore, event: ParsedEvent, link: LinkDelete,
                 outcome: BatchOutcome) -> None:
    head = store.lock_link(link.from_id, link.relation_type, link.to_id)
    if head is None or head.namespace_id != event.namespace:
        raise LinkNotFound("no such link in this namespace", field="data")
    _check_version(head.source_version, event.version)
    store.soft_delete_link(link.from_id, link.relation_type, link.to_id, event.version,
                           event.event_id)
    store.enqueue(event.namespace, link.from_id, EDGE_SYNC,
                  edge_payload(link.from_id, link.relation_type, link.to_id))
    outcome.outbox_rows += 1
