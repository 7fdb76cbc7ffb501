"""A node the graph holds keeps its edges: its later syncs (the one after embedding, a re-put)
do not re-write its incident links; a node new to the graph (or brought back after a DETACH
DELETE) gets them back. Real Postgres and FalkorDB, two tenants; the relay runs in-process on a
database and graph of the test's own."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from pipeline.graph.falkordb.schema import connect
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.kafka.io import KafkaChangeSink, make_producer
from pipeline.ops.verify import verify
from pipeline.outbox.ops import NODE_SYNC
from pipeline.outbox.relay import OutboxRelay, RelayStats
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.entities.conftest import db, proj_settings
from tests.entities.projutil import enqueue
from tests.pipelineutil import envelope, ingest, put

pytestmark = pytest.mark.stack
__all__ = ["db", "proj_settings"]

_EDGES = "MATCH (a {id: $a})-[e]->(b {id: $b}) RETURN count(e)"


def _relay(settings: Settings) -> RelayStats:
    pool = make_pool(settings, max_size=2)
    producer = make_producer(settings)
    try:
        return OutboxRelay(settings, pool, FalkorGraphWriter.from_settings(settings),
                           KafkaChangeSink(producer, settings.topic_changes)).run()
    finally:
        producer.close()
        pool.close()


def _linked_pair(ns: uuid.UUID) -> tuple[list[dict[str, Any]], str, str]:
    a, b = put(ns, title="Acme"), put(ns, title="Bolt")
    aid, bid = a["data"]["id"], b["data"]["id"]
    link = envelope("link.put", ns, {"from": aid, "to": bid, "relation_type": "partner",
                                     "meta": {"note": "long-time partner"}})
    return [a, b, link], aid, bid


def test_a_held_node_keeps_its_edges_and_a_new_one_gets_them_back(
        db: psycopg.Connection[Any], proj_settings: Settings) -> None:
    settings = proj_settings
    ns_a, ns_b = uuid.uuid4(), uuid.uuid4()
    events_a, a1, a2 = _linked_pair(ns_a)
    events_b, b1, b2 = _linked_pair(ns_b)
    ingest(settings, events_a + events_b)
    graph = connect(settings).select_graph(settings.graph_name)
    assert graph.query(_EDGES, {"a": a1, "b": a2}).result_set == [[1]]
    assert graph.query(_EDGES, {"a": b1, "b": b2}).result_set == [[1]]

    # re-syncing a node the graph holds writes the node, not its links
    enqueue(db, ns_a, NODE_SYNC, [a1, a2])
    stats = _relay(settings)
    assert (stats.nodes_upserted, stats.edges_upserted) == (2, 0)
    assert graph.query(_EDGES, {"a": a1, "b": a2}).result_set == [[1]]

    # a node the graph lost (DETACH DELETE took its edge) gets its live links back
    graph.query("MATCH (n {id: $id}) DETACH DELETE n", {"id": a1})
    enqueue(db, ns_a, NODE_SYNC, [a1])
    stats = _relay(settings)
    assert (stats.nodes_upserted, stats.edges_upserted) == (1, 1)
    assert graph.query(_EDGES, {"a": a1, "b": a2}).result_set == [[1]]
    assert graph.query(_EDGES, {"a": b1, "b": b2}).result_set == [[1]]  # tenant B's untouched
    assert verify(settings).clean
