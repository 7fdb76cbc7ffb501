"""Applying link events: a put (both endpoints must be live first-class objects of the namespace)
and a delete. A link whose endpoint has not arrived yet is deferred (`pipeline.ingest.deferred`);
later events about the same link queue behind it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from pipeline.domain.errors import (
    InvalidInput,
    LinkEndpointDeleted,
    LinkEndpointIsPart,
    LinkEndpointNotFound,
    LinkNotFound,
)
from pipeline.ingest.deferred import Defer
from pipeline.ingest.records import Applying, check_version
from pipeline.outbox.ops import EDGE_SYNC, edge_payload
from pipeline.ports import EventStore
from schemas.events import LinkDelete, LinkPut, ParsedEvent


def _queue_behind(ctx: Applying, link: LinkPut | LinkDelete) -> str:
    """The link's wait key; defers the event while an earlier one about the link waits."""
    key = f"link:{link.from_id}:{link.relation_type}:{link.to_id}"
    if key != ctx.waiting_ok and ctx.store.is_waiting(key):
        raise Defer(InvalidInput("an earlier event about this link is still waiting for its "
                                 "endpoints", field="data"), key)
    return key


def _endpoints_ok(store: EventStore, namespace: uuid.UUID, ids: Sequence[uuid.UUID],
                  wait_key: str) -> None:
    heads = store.share_objects(ids)
    for name, oid in zip(("data.from", "data.to"), ids, strict=True):
        head = heads.get(oid)
        if head is None:
            # its put may still be on its way on another partition: wait for it, bounded
            raise Defer(LinkEndpointNotFound(f"{name} names no object in this namespace",
                                             field=name), wait_key)
        if head.namespace_id != namespace:
            raise LinkEndpointNotFound(f"{name} names no object in this namespace", field=name)
        if head.deleted_at is not None:
            raise LinkEndpointDeleted(f"{name} names a deleted object", field=name)
        if head.parent_id is not None:
            raise LinkEndpointIsPart(f"{name} names a part; link first-class objects",
                                     field=name)


def put(ctx: Applying, event: ParsedEvent, link: LinkPut) -> None:
    """Write (or revive) a link between two live first-class objects."""
    wait_key = _queue_behind(ctx, link)
    store = ctx.store
    _endpoints_ok(store, event.namespace, [link.from_id, link.to_id], wait_key)
    head = store.lock_link(link.from_id, link.relation_type, link.to_id)
    if head is not None:
        check_version(head.source_version, event.version)
    meta = link.meta.model_dump(mode="json")
    store.upsert_link(event.namespace, link.from_id, link.relation_type, link.to_id, meta,
                      event.version, event.event_id)
    store.enqueue(event.namespace, link.from_id, EDGE_SYNC,
                  edge_payload(link.from_id, link.relation_type, link.to_id))
    ctx.outcome.outbox_rows += 1


def delete(ctx: Applying, event: ParsedEvent, link: LinkDelete) -> None:
    """Soft-delete a link of this namespace."""
    _queue_behind(ctx, link)
    store = ctx.store
    head = store.lock_link(link.from_id, link.relation_type, link.to_id)
    if head is None or head.namespace_id != event.namespace:
        raise LinkNotFound("no such link in this namespace", field="data")
    check_version(head.source_version, event.version)
    store.soft_delete_link(link.from_id, link.relation_type, link.to_id, event.version,
                           event.event_id)
    store.enqueue(event.namespace, link.from_id, EDGE_SYNC,
                  edge_payload(link.from_id, link.relation_type, link.to_id))
    ctx.outcome.outbox_rows += 1
