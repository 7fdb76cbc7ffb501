"""Each relay lane claims its oldest due rows from an index of its own (migration 0040): a
backlog of one lane is not read by the other lane's claims. Real Postgres: 20,000 entity syncs
pending ahead of a few node syncs of two tenants; the object lane's claim walks
`outbox_due_objects` and answers the node rows in id order, the entity lane's its own rows; a
row in back-off is skipped, not claimed early."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pipeline.outbox import store
from pipeline.outbox.ops import EDGE_SYNC, ENTITY_SYNC, NODE_SYNC, OBJECT_LANE_OPS
from tests.pipeline.conftest import db

pytestmark = pytest.mark.stack
__all__ = ["db"]
OBJECT_OPS = OBJECT_LANE_OPS  # the relay's own


def _enqueue(db: psycopg.Connection[Any], ns: uuid.UUID, op: str, count: int) -> list[int]:
    return [r[0] for r in db.execute(
        "INSERT INTO outbox (namespace_id, aggregate_id, op) SELECT %s, gen_random_uuid(), %s"
        " FROM generate_series(1, %s) RETURNING id", (ns, op, count)).fetchall()]


def test_a_lane_claims_its_own_rows_past_the_other_lanes_backlog(
        db: psycopg.Connection[Any]) -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    backlog = _enqueue(db, a, ENTITY_SYNC, 20_000)
    nodes = _enqueue(db, a, NODE_SYNC, 3) + _enqueue(db, b, NODE_SYNC, 3)
    later = _enqueue(db, b, NODE_SYNC, 1)
    db.execute("UPDATE outbox SET available_at = now() + interval '1 hour' WHERE id = %s",
               (later[0],))  # in back-off
    db.execute("ANALYZE outbox")

    claimed = store.claim_due(db, 4, ops=OBJECT_OPS)
    assert [r.id for r in claimed] == nodes[:4]
    assert {r.namespace_id for r in store.claim_due(db, 10, ops=OBJECT_OPS)} == {a, b}
    assert [r.id for r in store.claim_due(db, 10, ops=OBJECT_OPS)] == nodes  # not `later`
    assert [r.id for r in store.claim_due(db, 5, ops=OBJECT_OPS, exclude=True)] == backlog[:5]

    for exclude, index in ((False, "outbox_due_objects"), (True, "outbox_due_others")):
        query = store._lane_claim(OBJECT_OPS, exclude)
        plan = "\n".join(str(r[0]) for r in db.execute(
            sql.SQL("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ") + query,
            {"limit": 4, "absorb": 4, "edge": EDGE_SYNC}).fetchall())
        head = plan.split("CTE head")[1].split("CTE Scan on head")[0]
        assert index in head, plan
        assert "Rows Removed" not in head and "Sort" not in head, plan  # no backlog read


def test_the_lane_indexes_name_the_relays_object_ops(db: psycopg.Connection[Any]) -> None:
    # The migration cannot import the constant: an op added to one and not the other would
    # leave that lane's claims answering right but walking no index.
    defs = dict(db.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'outbox'"
                           " AND indexname LIKE 'outbox_due_%'").fetchall())
    quoted = ", ".join(f"'{op}'::text" for op in OBJECT_LANE_OPS)
    assert f"(op = ANY (ARRAY[{quoted}]))" in defs["outbox_due_objects"], defs
    assert f"(op <> ALL (ARRAY[{quoted}]))" in defs["outbox_due_others"], defs
