"""A curator's decision on a possibly-same pair outside the API (`brainstream entities review`):
the same path as `POST /v1/entities/possibly_same/{from}/{to}`. The decision is checked, published
as a `brainstream.entity.decision` event (the topic is its record: a replay applies it again),
then recorded and applied at once (`pipeline/entities/decisions.py`); the consumer later finds it
recorded. A broker that does not take it raises `Unavailable` and nothing changed."""

from __future__ import annotations

import uuid
from typing import Any, Protocol

import psycopg

from pipeline.domain.errors import EntityMerged, NotFound
from pipeline.entities.decision_events import decision_envelope
from pipeline.entities.decisions import FAILED, WAITING, Applied, record_and_apply
from pipeline.entities.merging import check_pair
from pipeline.entities.store import merges
from pipeline.postgres.plans import run


class DecisionPublisher(Protocol):
    """Sends one event and waits until the broker has it (`LazyPublisher`)."""

    def publish(self, envelope: dict[str, Any]) -> None: ...


def decide(conn: psycopg.Connection[Any], publisher: DecisionPublisher, namespace: uuid.UUID,
           decision: str, from_id: uuid.UUID, to_id: uuid.UUID, *, decided_by: str,
           source: str, note: str | None = None) -> tuple[Applied, str | None]:
    """Check, publish, record and apply one decision (verify, refuse, defer); what applying
    did and the pair's status after. The event id is fresh, so (source, id) stays unique."""
    run(conn, check_pair(namespace, from_id, to_id, decision))
    event_id = str(uuid.uuid4())
    publisher.publish(decision_envelope(namespace, event_id, decision, from_id, to_id,
                                        decided_by, note, source=source))
    done = run(conn, record_and_apply(namespace, source, event_id, decision, from_id, to_id,
                                      decided_by, note))
    if done.status == WAITING:  # checked a moment ago: it vanished meanwhile
        raise NotFound(f"entity {from_id} or {to_id} is gone", field="from")
    if done.status == FAILED:
        raise EntityMerged(f"entity {from_id} and {to_id} are one already", field="from")
    return done, run(conn, merges.pair_status(namespace, from_id, to_id))
