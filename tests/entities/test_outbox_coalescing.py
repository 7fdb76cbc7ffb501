"""The relay's claims (publish-to-indexed at half load): an aggregate's later rows are claimed
with its first (coalesced): behind a backlog, an object's node row written after embedding rides
with its node row of the consumer's commit. Coalescing is safe because a row asks for a re-sync
of the aggregate's current state, which the relay reads after it claims. A row of a retired op
(the entity projection's, enqueued by a worker of an older version) is marked done unapplied.
On a fresh database of its own (no relay worker there); two tenants."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from pipeline.graph.falkordb.schema import NODE_LABEL, connect
from pipeline.outbox import store as outbox
from pipeline.outbox.ops import EDGE_SYNC, NODE_SYNC, RETIRED_OPS, edge_payload
from pipeline.settings import Settings
from tests.entities.projutil import relay
from tests.pipelineutil import ingest, put

pytestmark = pytest.mark.stack


def _row(ns: uuid.UUID, aggregate: uuid.UUID, op: str,
         payload: dict[str, Any] | None = None) -> outbox.Entry:
    return outbox.Entry(ns, aggregate, op, payload)


def test_claim_takes_the_later_rows_of_the_aggregates_it_claims(
        db: psycopg.Connection[Any]) -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    node, other, third, frm, to = (uuid.uuid4() for _ in range(5))
    db.execute("DELETE FROM outbox")
    outbox.enqueue_many(db, [
        _row(a, node, NODE_SYNC),                                           # head
        _row(b, third, NODE_SYNC),                                          # head
        _row(a, frm, EDGE_SYNC, edge_payload(frm, "cites", to)),            # head
        _row(a, other, NODE_SYNC),                     # another aggregate: waits its turn
        _row(a, node, NODE_SYNC),                      # the same node: absorbed
        _row(b, third, NODE_SYNC),                     # the same node: absorbed
        _row(a, frm, EDGE_SYNC, edge_payload(frm, "cites", uuid.uuid4())),  # another link
        _row(a, frm, EDGE_SYNC, edge_payload(frm, "cites", to)),    # the same link: absorbed
        _row(a, node, EDGE_SYNC, edge_payload(node, "cites", to)),  # same id, another op: waits
        _row(b, node, NODE_SYNC),                      # (ids are global: the same re-sync)
    ])
    ids = [r[0] for r in db.execute("SELECT id FROM outbox ORDER BY id").fetchall()]

    claimed = outbox.claim_due(db, 3, absorb=10)
    assert [r.id for r in claimed] == [ids[0], ids[1], ids[2], ids[4], ids[5], ids[7], ids[9]]
    assert [r.id for r in outbox.claim_due(db, 3, absorb=1)] == [*ids[:3], ids[4]]
    assert [r.id for r in outbox.claim_due(db, 3, absorb=0)] == ids[:3]

    # a row postponed (back-off) or failed is not claimed early
    db.execute("UPDATE outbox SET available_at = now() + interval '1 hour' WHERE id = %s",
               (ids[4],))
    db.execute("UPDATE outbox SET failed_at = now() WHERE id = %s", (ids[5],))
    assert [r.id for r in outbox.claim_due(db, 3)] == [ids[0], ids[1], ids[2], ids[7], ids[9]]
    db.execute("DELETE FROM outbox")


def test_the_relay_applies_coalesced_rows_once_and_marks_them_all_done(
        db: psycopg.Connection[Any], proj_settings: Settings) -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    events = [put(a, title="First"), put(a, title="Second"), put(b, title="Theirs")]
    ingest(proj_settings, events)
    relay(proj_settings)
    o1, o2, b1 = (uuid.UUID(e["data"]["id"]) for e in events)
    db.execute("UPDATE objects SET title = title || ', retitled' WHERE id = ANY(%s)", ([o1, b1],))
    outbox.enqueue_many(db, [_row(a, o1, NODE_SYNC), _row(a, o2, NODE_SYNC),
                             _row(b, b1, NODE_SYNC), _row(a, o1, NODE_SYNC)])
    first, second, theirs, again = (r[0] for r in db.execute(
        "SELECT id FROM outbox WHERE done_at IS NULL ORDER BY id").fetchall())

    stats = relay(proj_settings.model_copy(update={"relay_batch_size": 1}))
    assert (stats.rows, stats.coalesced, stats.rounds) == (4, 1, 3)
    assert stats.nodes_upserted == 3  # o1 once, for both its rows
    done = dict(db.execute("SELECT id, done_at FROM outbox WHERE id = ANY(%s)",
                           ([first, second, theirs, again],)).fetchall())
    assert done[first] == done[again]  # one round, one transaction
    assert len({done[first], done[second], done[theirs]}) == 3
    graph = connect(proj_settings).select_graph(proj_settings.graph_name)
    titles = dict(graph.query(f"MATCH (n:{NODE_LABEL}) RETURN n.id, n.title").result_set)
    assert titles == {str(o1): "First, retitled", str(o2): "Second", str(b1): "Theirs, retitled"}


def test_rows_of_a_retired_op_are_marked_done_unapplied(
        db: psycopg.Connection[Any], proj_settings: Settings) -> None:
    """A worker of an older version may still enqueue the entity projection's rows during an
    upgrade: the relay marks them done with their batch and writes nothing for them; an op it
    has never known is still refused (dead-lettered after its tries), never dropped."""
    a = uuid.uuid4()
    event = put(a, title="Beside the retired rows")
    ingest(proj_settings, [event])
    oid = uuid.UUID(event["data"]["id"])
    retired = [_row(a, uuid.uuid4(), op, {"edges": []}) for op in RETIRED_OPS for _ in range(3)]
    outbox.enqueue_many(db, [*retired, _row(a, oid, "mentions_sync"), _row(a, oid, NODE_SYNC),
                             _row(a, uuid.uuid4(), "nonsense_sync")])
    stats = relay(proj_settings.model_copy(update={"relay_max_attempts": 1}))
    assert (stats.retired, stats.nodes_upserted, stats.rows_failed) == (7, 1, 1)
    left = db.execute("SELECT op FROM outbox WHERE done_at IS NULL").fetchall()
    assert left == [("nonsense_sync",)]  # failed, waiting for an operator
    graph = connect(proj_settings).select_graph(proj_settings.graph_name)
    assert graph.query("MATCH (n) RETURN labels(n)[0], n.id").result_set == [
        [NODE_LABEL, str(oid)]]
