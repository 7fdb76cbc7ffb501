"""Applying one event in its own savepoint, by the handler of its payload's type.

A bad event is undone and dead-lettered without undoing its neighbours in the batch; an event
that cannot apply yet is undone and deferred; a store that cannot be reached fails the batch,
which is retried whole.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pipeline.domain.errors import BrainstreamError, InvalidInput, Unavailable
from pipeline.ingest import deletes, entities, links, memory, objects
from pipeline.ingest.deferred import Defer
from pipeline.ingest.records import Applying, Stale
from schemas.deletes import ObjectsSoftDelete
from schemas.entities import EntityDecision
from schemas.events import LinkDelete, LinkPut, ObjectPut, ObjectSoftDelete, ParsedEvent
from schemas.memory import MessageMetadata, MessagesAdd, SessionDelete, SessionPut, SummaryPut

log = logging.getLogger(__name__)

Handler = Callable[[Applying, ParsedEvent, Any], None]

# One handler per payload type (`schemas.events.Payload`).
HANDLERS: dict[type[Any], Handler] = {
    ObjectPut: objects.put,
    ObjectSoftDelete: objects.soft_delete,
    LinkPut: links.put,
    LinkDelete: links.delete,
    SessionPut: memory.put_session,
    SessionDelete: memory.delete_session,
    MessagesAdd: memory.add_messages,
    MessageMetadata: memory.set_message_metadata,
    SummaryPut: memory.put_summary,
    EntityDecision: entities.record_decision,
    ObjectsSoftDelete: deletes.soft_delete_matching,
}


def apply_one(ctx: Applying, event: ParsedEvent) -> BrainstreamError | None:
    """Apply one event in its own savepoint. None: applied, a duplicate or stale; an error: it
    is rejected for good (dead-letter it), its writes undone. Raises `Defer` (not yet, its writes
    undone) and `Unavailable` (the store cannot be reached: retry the batch)."""
    store, outcome = ctx.store, ctx.outcome
    try:
        with store.savepoint():
            if not store.claim_event(event.namespace, event.source, event.event_id,
                                     event.type):
                outcome.duplicates += 1
                return None
            try:
                HANDLERS[type(event.payload)](ctx, event, event.payload)
            except Stale:
                store.set_outcome(event.namespace, event.source, event.event_id, "stale")
                outcome.stale += 1
                return None
        outcome.applied += 1
        return None
    except (Defer, Unavailable):
        raise
    except InvalidInput as exc:
        # RejectedByDatabase included: Postgres refused a value the schema let through; the
        # event, not the batch, is bad.
        return exc
    except Exception as exc:
        # A bug must not lose the event: dead-letter it so it can be re-driven after a fix.
        log.exception("unexpected error applying event %s", event.event_id)
        return BrainstreamError(f"{type(exc).__name__}: {exc}")
