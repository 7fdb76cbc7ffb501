"""The graph projection in tests: settings on a database and graph of a test's own, the relay
drained in-process, outbox rows by hand, and what the graph holds by label and relation type."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import psycopg

from pipeline.graph.falkordb.schema import connect
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.kafka.io import KafkaChangeSink, make_producer
from pipeline.outbox import store as outbox
from pipeline.outbox.relay import OutboxRelay
from pipeline.outbox.relay_stats import RelayStats
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.stackutil import make_settings

Conn = psycopg.Connection[Any]


def settings_for(dsn: str, stack: Settings) -> Settings:
    """Settings on database `dsn` and a graph of its own, on the test stack's services."""
    # small chunks: a short content makes several parts
    return make_settings(postgres_dsn=dsn, graph_name=f"p_{uuid.uuid4().hex[:8]}",
                         chunk_max_tokens=16, chunk_overlap_tokens=0,
                         **{k: getattr(stack, k) for k in
                            ("kafka_port", "falkordb_port", "redis_port")})


def relay(settings: Settings, *, max_rounds: int = 1000) -> RelayStats:
    """Drain the outbox into the graph (up to `max_rounds` rounds), as the relay worker would."""
    pool = make_pool(settings, max_size=2)
    producer = make_producer(settings)
    try:
        return OutboxRelay(settings, pool, FalkorGraphWriter.from_settings(settings),
                           KafkaChangeSink(producer, settings.topic_changes)).run(
                               max_rounds=max_rounds)
    finally:
        producer.close()
        pool.close()


def enqueue(conn: Conn, ns: uuid.UUID, op: str, ids: list[uuid.UUID] | list[str]) -> None:
    outbox.enqueue_many(conn, [outbox.Entry(ns, uuid.UUID(str(i)), op) for i in ids])


def graph_shape(settings: Settings) -> tuple[Counter[str], Counter[str]]:
    """What the graph holds: nodes by label, edges by relation type."""
    graph = connect(settings).select_graph(settings.graph_name)
    nodes = Counter({str(label): int(n) for label, n in graph.ro_query(
        "MATCH (n) UNWIND labels(n) AS label RETURN label, count(*)").result_set})
    edges = Counter({str(t): int(n) for t, n in graph.ro_query(
        "MATCH ()-[e]->() RETURN type(e), count(e)").result_set})
    return nodes, edges
