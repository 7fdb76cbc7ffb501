"""The curators' decisions on entities (migration 0025): recording a `brainstream.entity.decision`
(the consumer, the API), claiming the pending ones, and marking what applying one did. Plans
(`pipeline/postgres/plans.py`), so the API runs them on its async pool and the worker on
its synchronous one; `pipeline/entities/decisions.py` decides what applying means.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from psycopg.types.json import Jsonb

from pipeline.postgres.plans import Plan, Statement

# A decision is recorded once per event: a redelivery, or the consumer finding the row the API
# wrote when it applied the decision itself, changes nothing.
RECORD = """
INSERT INTO entity_decisions (namespace_id, source, event_id, decision, from_id, to_id,
                              decided_by, note)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (namespace_id, source, event_id) DO NOTHING"""

_LOCK = """
SELECT decision, from_id, to_id, decided_by, note, status, error, result FROM entity_decisions
WHERE namespace_id = %s AND source = %s AND event_id = %s FOR UPDATE"""

# Pending decisions in arrival order; a worker applying one holds it, the others skip it.
_CLAIM = """
SELECT namespace_id, source, event_id FROM entity_decisions WHERE status = 'pending'
ORDER BY seq LIMIT %s FOR UPDATE SKIP LOCKED"""

_MARK = """
UPDATE entity_decisions SET status = %s, error = %s, result = %s, applied_at = now()
WHERE namespace_id = %s AND source = %s AND event_id = %s"""

_PENDING = "SELECT count(*) FROM entity_decisions WHERE status = 'pending'"


@dataclass(frozen=True)
class DecisionRow:
    """One recorded decision and what became of it."""

    namespace: uuid.UUID
    source: str
    event_id: str
    decision: str  # merge | verify | refuse
    from_id: uuid.UUID
    to_id: uuid.UUID
    decided_by: str
    note: str | None
    status: str  # pending | applied | failed
    error: str | None = None
    result: dict[str, Any] | None = None


def record(namespace: uuid.UUID, source: str, event_id: str, decision: str,
           from_id: uuid.UUID, to_id: uuid.UUID, decided_by: str,
           note: str | None) -> Plan[None]:
    """Record a decision as pending (nothing when this event's decision is there already)."""
    yield Statement(RECORD, (namespace, source, event_id, decision, from_id, to_id,
                             decided_by, note))


def lock(namespace: uuid.UUID, source: str, event_id: str) -> Plan[DecisionRow | None]:
    """The decision of an event, locked until the transaction ends (None: not recorded)."""
    rows = yield Statement(_LOCK, (namespace, source, event_id))
    if not rows:
        return None
    decision, from_id, to_id, by, note, status, error, result = rows[0]
    return DecisionRow(namespace, source, event_id, decision, from_id, to_id, by, note, status,
                       error, result)


def claim_pending(limit: int) -> Plan[list[tuple[uuid.UUID, str, str]]]:
    """(namespace, source, event id) of up to `limit` pending decisions, oldest first, locked
    (another worker skips them)."""
    rows = yield Statement(_CLAIM, (limit,))
    return [(r[0], r[1], r[2]) for r in rows]


def mark(row: DecisionRow, status: str, *, error: str | None = None,
         result: dict[str, Any] | None = None) -> Plan[None]:
    """What applying the decision did: `applied` (with the merge's report) or `failed` (code)."""
    yield Statement(_MARK, (status, error, Jsonb(result) if result is not None else None,
                            row.namespace, row.source, row.event_id))


def pending() -> Plan[int]:
    """Decisions still waiting for their entities (or a worker)."""
    rows = yield Statement(_PENDING)
    return int(rows[0][0])
