"""Curators' decisions as events: applying a recorded `brainstream.entity.decision`.

A person's merge, verification or refusal is a fact the content cannot re-derive, so it goes on
the input topic (schemas/entities.py) and survives a replay: the consumer records it
(`pipeline/ingest/entities.py`), and it is applied here once both entities exist, by the API at
once for its own decisions, by the worker after extraction (and the sweep) for the others, by a
replay after each extraction round. Entity ids are derived from namespace, name and label class
(`pipeline/entities/ids.py`), so a decision names the same entities in every generation.

Applying follows merges: a decision about an entity merged meanwhile (the resolver got there
first in a replay, or merged it the other way round) applies to its survivor. `merge` and
`verify` of two entities that are already one are applied as they stand; `refuse` or `defer` of
two that are already one cannot be honoured and fails with `entity_merged`. `defer` moves an
undecided pair to status deferred and leaves a decided one as it is. A decision whose entities do
not exist (yet) waits, pending. Every step is idempotent: the decision row is locked while it
is applied and says `applied` afterwards, so a second worker, the API and the consumer find it
done.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from pipeline.domain.errors import BrainstreamError, EntityMerged
from pipeline.entities.merging import connection_of
from pipeline.entities.store import decisions as book, merges, resolution as store
from pipeline.entities.store.merges import MergeReport
from pipeline.postgres.plans import Plan, run

APPLIED = "applied"
WAITING = "waiting"
FAILED = "failed"
# Decisions applied per run (one transaction): curators decide by hand, so a run rarely has
# more; a backlog (a replay) drains in several.
DECISION_BATCH = 500


@dataclass(frozen=True)
class Applied:
    """What applying one decision did: `applied` (with the merge it made, if any), `waiting`
    (an entity does not exist yet) or `failed` (with the error code)."""

    status: str
    merge: MergeReport | None = None
    error: str | None = None


@dataclass
class DecisionStats:
    """What one `apply_pending` call did."""

    applied: int = 0
    waiting: int = 0
    failed: int = 0


def apply_plan(namespace: uuid.UUID, source: str, event_id: str) -> Plan[Applied]:
    """Apply the recorded decision of one event (see the module docstring)."""
    row = yield from book.lock(namespace, source, event_id)
    if row is None:
        return Applied(WAITING)
    if row.status == APPLIED:
        return Applied(APPLIED, _report(row.result))
    if row.status == FAILED:
        return Applied(FAILED, error=row.error)
    found = yield from store.entities(namespace, [row.from_id, row.to_id])
    if row.from_id not in found or row.to_id not in found:
        return Applied(WAITING)
    # a merge re-points what was merged into the merged entity: one step reaches the survivor
    a, b = (found[e].merged_into or e for e in (row.from_id, row.to_id))
    report: MergeReport | None = None
    if a == b:
        if row.decision in ("refuse", "defer"):
            yield from book.mark(row, FAILED, error=EntityMerged.code)
            return Applied(FAILED, error=EntityMerged.code)
    elif row.decision == "refuse":
        yield from merges.decide(namespace, a, b, "refused")
    elif row.decision == "defer":
        yield from merges.defer(namespace, a, b)
    else:
        confidence: float | None = 1.0
        method: str | None = "person"
        if row.decision == "verify":
            confidence, method = yield from merges.decide(namespace, a, b, "verified")
        report = yield from merges.merge(
            namespace, a, b, confidence=confidence if confidence is not None else 1.0,
            method=method or "person", decided_by=row.decided_by, dry_run=False,
            note=row.note or ("verified possibly_same" if row.decision == "verify" else None))
    yield from book.mark(row, APPLIED, result=_as_json(report) if report else None)
    return Applied(APPLIED, report)


def record_and_apply(namespace: uuid.UUID, source: str, event_id: str, decision: str,
                     from_id: uuid.UUID, to_id: uuid.UUID, decided_by: str,
                     note: str | None) -> Plan[Applied]:
    """What the API does once it published a decision: record it (the consumer then finds it
    recorded) and apply it in the same transaction."""
    yield from book.record(namespace, source, event_id, decision, from_id, to_id, decided_by,
                           note)
    return (yield from apply_plan(namespace, source, event_id))


def apply_pending(conn_or_pool: psycopg.Connection[Any] | ConnectionPool, *,
                  batch: int = DECISION_BATCH) -> DecisionStats:
    """Apply up to `batch` pending decisions, oldest first, in one transaction (each in a
    savepoint: one that fails is marked failed with its code, the others go on). Call it after
    extraction created entities: what still waits for its entities stays pending."""
    stats = DecisionStats()
    with connection_of(conn_or_pool) as conn, conn.transaction():
        for namespace, source, event_id in run(conn, book.claim_pending(batch)):
            try:
                done = run(conn, apply_plan(namespace, source, event_id))
            except BrainstreamError as exc:  # a decision the store refuses: recorded, not retried
                row = run(conn, book.lock(namespace, source, event_id))
                if row is not None:
                    run(conn, book.mark(row, FAILED, error=exc.code))
                done = Applied(FAILED, error=exc.code)
            stats.applied += done.status == APPLIED
            stats.waiting += done.status == WAITING
            stats.failed += done.status == FAILED
    return stats


def _as_json(report: MergeReport) -> dict[str, Any]:
    return {k: [str(x) for x in v] if isinstance(v, list) else
            str(v) if isinstance(v, uuid.UUID) else v
            for k, v in dataclasses.asdict(report).items()}


def _report(result: dict[str, Any] | None) -> MergeReport | None:
    if not result:
        return None
    return MergeReport(uuid.UUID(result["from_id"]), uuid.UUID(result["into_id"]),
                       bool(result["dry_run"]), int(result["mentions"]), int(result["aliases"]),
                       int(result["edges_moved"]), int(result["edges_dropped"]),
                       [uuid.UUID(x) for x in result["objects"]], result.get("merge_id"),
                       result.get("part_count"))
