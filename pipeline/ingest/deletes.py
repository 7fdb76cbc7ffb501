"""Applying a delete by source or filter (`brainstream.objects.soft_delete`, schemas/deletes.py).

What it matches is decided here, at the event's place in the log: the objects the events before
it put and left alive, never one put after it, so a replay of the same log deletes the same
objects. Each is hidden as a delete by id hides it (its parts with it; the lexical queue's
triggers follow the rows; a `node_sync` per object re-syncs its graph node, removing it), and
the event is claimed in the ledger first, so a redelivered copy deletes nothing.
"""

from __future__ import annotations

from pipeline.domain.errors import InvalidInput
from pipeline.domain.write_model import Selection
from pipeline.ingest.records import Applying
from pipeline.outbox.ops import NODE_SYNC
from pipeline.retrieval.requests import check_filters
from schemas.deletes import ObjectsSoftDelete
from schemas.events import ParsedEvent
from schemas.limits import DELETE_MAX


def selection_of(payload: ObjectsSoftDelete) -> Selection:
    """The objects a payload names (its filters as the read side takes them)."""
    return Selection(payload.source, payload.selection_filters())


def soft_delete_matching(ctx: Applying, event: ParsedEvent, payload: ObjectsSoftDelete) -> None:
    """Hide the namespace's first DELETE_MAX matching objects (in id order) with their parts."""
    if event.version is not None:
        # `version` orders writes of one object; a delete of many has none to compare with.
        raise InvalidInput("a delete by source or filter takes no version", field="version")
    selection = selection_of(payload)
    # The filters mean what they mean to a search: the same property and kind checks.
    check_filters(ctx.catalog, selection.filters)
    deleted = ctx.store.soft_delete_matching(event.namespace, selection, limit=DELETE_MAX,
                                             event_id=event.event_id)
    ctx.store.record_object_versions([(object_id, "delete", event.event_id, None)
                                      for object_id in deleted])
    for object_id in deleted:
        ctx.store.enqueue(event.namespace, object_id, NODE_SYNC)
    ctx.outcome.outbox_rows += len(deleted)
