"""Applying link events: a put (both endpoints must be live first-class objects of the namespace)
and a delete. A link whose endpoint has not arrived yet is deferred (`pipeline.ingest.deferred`);
later events about the same link queue behind it.

Each event is an assertion about the link's group (pipeline/domain/validity.py): the group's
versions are recomputed and the change written to `link_versions` at the event's record time,
and the `links` row (what the current-state reads and the graph relay use) says what holds at
that time, as believed then.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from pipeline.domain.errors import (
    InvalidInput,
    LinkEndpointDeleted,
    LinkEndpointIsPart,
    LinkEndpointNotFound,
    LinkNotFound,
)
from pipeline.domain.links import event_ref
from pipeline.domain.validity import Assertion, Version, holding_at, recompute, undated_put
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
    """Assert that the link holds (from `valid_from`, until `valid_to`) between two live
    first-class objects; a functional type's other targets are cut where it starts."""
    wait_key = _queue_behind(ctx, link)
    store = ctx.store
    _endpoints_ok(store, event.namespace, [link.from_id, link.to_id], wait_key)
    head = store.lock_link(link.from_id, link.relation_type, link.to_id)
    if head is not None:
        check_version(head.source_version, event.version)
    meta = link.meta.model_dump(mode="json")
    _assert(ctx, event, link, Assertion(link.to_id, "holds", link.valid_from, link.valid_to, meta),
            change="put", meta=meta)


def delete(ctx: Applying, event: ParsedEvent, link: LinkDelete) -> None:
    """End a link of this namespace at `valid_to` (default: the event's time), or with
    `retract` withdraw every believed version of it (as if it never held)."""
    wait_key = _queue_behind(ctx, link)
    store = ctx.store
    head = store.lock_link(link.from_id, link.relation_type, link.to_id)
    if head is None and link.valid_to is not None and not link.retract:
        # A dated end published before the put it ends (histories arrive out of order): the
        # end is recorded, so the put, when it comes, holds until then. An undated delete of
        # an unknown link stays an error: it names no time to record.
        _endpoints_ok(store, event.namespace, [link.from_id, link.to_id], wait_key)
        _assert(ctx, event, link, Assertion(link.to_id, "ended", link.valid_to),
                change="delete", meta={})
        return
    if head is None or head.namespace_id != event.namespace:
        raise LinkNotFound("no such link in this namespace", field="data")
    check_version(head.source_version, event.version)
    if link.retract:
        _assert(ctx, event, link, None, change="retract", meta={})
        return
    ended = Assertion(link.to_id, "ended", link.valid_to or store.event_time())
    _assert(ctx, event, link, ended, change="delete", meta={})


def _meta_of(version: Version | None) -> str | None:
    """What the current-state row says for a holding version: its meta (None: not live)."""
    return None if version is None else json.dumps(version.meta, sort_keys=True)


def _assert(ctx: Applying, event: ParsedEvent, link: LinkPut | LinkDelete,
            assertion: Assertion | None, *, change: str, meta: dict[str, Any]) -> None:
    """Recompute the link's group with `assertion` (None: the link retracted), write the change
    to its versions, and bring the current-state rows of the links whose state at the event's
    time changed (the event's own link always) in line, each with an edge sync."""
    store = ctx.store
    functional = ctx.catalog.is_functional(link.relation_type)
    at = store.event_time()
    believed, last = store.link_group(link.from_id, link.relation_type,
                                      None if functional else link.to_id)
    before = holding_at([v for _, v in believed], at)
    retract = link.to_id if assertion is None else None
    if isinstance(link, LinkPut) and link.valid_from is None and link.valid_to is None:
        assert assertion is not None
        assertion = undated_put([v for _, v in believed], assertion, at)
    versions, diff = recompute(believed, assertion, functional=functional, retract=retract)
    after = holding_at(versions, at)
    inserts = [(v, change if v.origin is assertion else "retract" if retract else "cut")
               for v in diff.insert]
    store.write_link_versions(event.namespace, link.from_id, link.relation_type,
                              diff.invalidate, inserts, last, at=at,
                              event_ref=event_ref(event.source, event.event_id))
    touched = {link.to_id} | {key[0] for key in diff.invalidate} | {v.to_id for v in diff.insert}
    for to_id in sorted(touched):
        own = to_id == link.to_id
        now = after.get(to_id)
        if not own and _meta_of(now) == _meta_of(before.get(to_id)):
            continue  # its past or future changed, not what holds now
        store.set_link_state(event.namespace, link.from_id, link.relation_type, to_id,
                             None if now is None else dict(now.meta), at=at,
                             event_id=event.event_id, version=event.version if own else None,
                             fallback_meta=meta)
        store.enqueue(event.namespace, link.from_id, EDGE_SYNC,
                      edge_payload(link.from_id, link.relation_type, to_id))
        ctx.outcome.outbox_rows += 1
