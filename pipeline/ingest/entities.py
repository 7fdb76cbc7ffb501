"""Applying the entity layer's event: a curator's decision on two entities
(`brainstream.entity.decision`, schemas/entities.py).

The consumer only records it (once per event): the entities it names are derived by the
extraction stage after the consumer's batch, so in a replay they do not exist yet here. The
worker applies recorded decisions once both entities exist (`pipeline/entities/decisions.py`);
the consumer's batch asks it to by triggering an extraction round.
"""

from __future__ import annotations

from pipeline.ingest.records import Applying
from schemas.entities import EntityDecision
from schemas.events import ParsedEvent


def record_decision(ctx: Applying, event: ParsedEvent, data: EntityDecision) -> None:
    """Record the decision as pending (a redelivered event, or the decision the API already
    applied, changes nothing)."""
    ctx.store.record_entity_decision(event.namespace, event.source, event.event_id,
                                     data.decision, data.from_id, data.to, data.decided_by,
                                     data.note)
    ctx.outcome.entity_decisions += 1
