"""The relay's claim walks the partial index of due rows (`outbox_due`, migration 0043) in id
order: a long history of done rows and a row in back-off are not read. Real Postgres, two
tenants."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from pipeline.outbox import store
from pipeline.outbox.ops import EDGE_SYNC, NODE_SYNC
from tests.pipeline.conftest import db

pytestmark = pytest.mark.stack
__all__ = ["db"]


def _enqueue(db: psycopg.Connection[Any], ns: uuid.UUID, op: str, count: int) -> list[int]:
    return [r[0] for r in db.execute(
        "INSERT INTO outbox (namespace_id, aggregate_id, op) SELECT %s, gen_random_uuid(), %s"
        " FROM generate_series(1, %s) RETURNING id", (ns, op, count)).fetchall()]


def test_the_claim_walks_the_due_rows_in_id_order(db: psycopg.Connection[Any]) -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    history = _enqueue(db, a, NODE_SYNC, 20_000)
    db.execute("UPDATE outbox SET done_at = now() WHERE id = ANY(%s)", (history,))
    nodes = _enqueue(db, a, NODE_SYNC, 3) + _enqueue(db, b, NODE_SYNC, 3)
    later = _enqueue(db, b, NODE_SYNC, 1)
    db.execute("UPDATE outbox SET available_at = now() + interval '1 hour' WHERE id = %s",
               (later[0],))  # in back-off
    db.execute("ANALYZE outbox")

    assert [r.id for r in store.claim_due(db, 4)] == nodes[:4]
    assert {r.namespace_id for r in store.claim_due(db, 10)} == {a, b}
    assert [r.id for r in store.claim_due(db, 10)] == nodes  # not `later`

    plan = "\n".join(str(r[0]) for r in db.execute(
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + store._CLAIM,
        {"limit": 4, "absorb": 4, "edge": EDGE_SYNC}).fetchall())
    head = plan.split("CTE head")[1].split("CTE Scan on head")[0]
    assert "outbox_due" in head, plan
    assert "Rows Removed" not in head and "Sort" not in head, plan  # no history read
    db.execute("DELETE FROM outbox WHERE namespace_id = ANY(%s)", ([a, b],))
