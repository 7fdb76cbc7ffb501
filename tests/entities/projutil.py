"""Filling the entity tables by hand (as the extraction stage and the resolver would) and reading
the graph's entity layer back, for the projection tests."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from pipeline.domain.projection import EntityEdgeState, MentionsState, NamedEntityState
from pipeline.entities.names import normalise
from pipeline.graph.falkordb import cypher
from pipeline.graph.falkordb.schema import connect
from pipeline.graph.falkordb.writer import (
    FalkorGraphWriter,
    entity_edge_state,
    mentions_state,
    named_entity_state,
)
from pipeline.kafka.io import KafkaChangeSink, make_producer
from pipeline.outbox import store as outbox
from pipeline.outbox.relay import LANES, OutboxRelay, RelayStats
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


def relay(settings: Settings, *, max_rounds: int = 1000,
          lanes: Sequence[str] = LANES) -> RelayStats:
    """Drain the outbox into the graph (up to `max_rounds` rounds), as the relay worker would
    (both lanes, unless `lanes` says which)."""
    pool = make_pool(settings, max_size=2)
    producer = make_producer(settings)
    try:
        return OutboxRelay(settings, pool, FalkorGraphWriter.from_settings(settings),
                           KafkaChangeSink(producer, settings.topic_changes)).run(
                               max_rounds=max_rounds, lanes=lanes)
    finally:
        producer.close()
        pool.close()


def entity(conn: Conn, ns: uuid.UUID, name: str, label: str = "NAME") -> uuid.UUID:
    """A new entity row (part_count is the extraction stage's; here: 1)."""
    eid = uuid.uuid4()
    conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label, part_count)"
                 " VALUES (%s, %s, %s, %s, %s, 1)", (eid, ns, name, normalise(name), label))
    return eid


def mention(conn: Conn, ns: uuid.UUID, row_id: uuid.UUID | str, eid: uuid.UUID, *,
            start: int = 0, field: str = "title") -> None:
    """A span of `row_id` naming `eid` (start..start+4)."""
    conn.execute("INSERT INTO mentions (row_id, field, start_pos, end_pos, namespace_id,"
                 " entity_id, label, text) VALUES (%s, %s, %s, %s, %s, %s, 'NAME', 'span')",
                 (row_id, field, start, start + 4, ns, eid))


def edge(conn: Conn, ns: uuid.UUID, a: uuid.UUID, b: uuid.UUID, edge_type: str, *,
         predicate: str = "", weight: float = 0.0, status: str | None = None,
         confidence: float | None = None, method: str | None = None,
         evidence: tuple[uuid.UUID | str, ...] = ()) -> None:
    conn.execute("INSERT INTO entity_edges (namespace_id, from_id, to_id, edge_type, predicate,"
                 " weight, status, confidence, method, evidence)"
                 " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s::uuid[])",
                 (ns, a, b, edge_type, predicate, weight, status, confidence, method,
                  [str(e) for e in evidence]))


def enqueue(conn: Conn, ns: uuid.UUID, op: str, ids: list[uuid.UUID] | list[str]) -> None:
    outbox.enqueue_many(conn, [outbox.Entry(ns, uuid.UUID(str(i)), op) for i in ids])


@dataclass(frozen=True)
class Snapshot:
    """The graph's entity layer, comparable as a whole."""

    entities: frozenset[NamedEntityState]
    mentions: frozenset[MentionsState]
    edges: frozenset[EntityEdgeState]

    def entity_ids(self, namespace: uuid.UUID | None = None) -> set[str]:
        return {e.id for e in self.entities if namespace is None or e.namespace == str(namespace)}

    def mention_pairs(self) -> set[tuple[str, str]]:
        return {(m.root_id, m.entity_id) for m in self.mentions}

    def edge_keys(self) -> set[tuple[str, str, str, str]]:
        return {(e.key.from_id, e.key.edge_type, e.key.predicate, e.key.to_id)
                for e in self.edges}


def snapshot(settings: Settings) -> Snapshot:
    graph = connect(settings).select_graph(settings.graph_name)
    return Snapshot(
        entities=frozenset(named_entity_state(r) for r in
                           graph.ro_query(cypher.ALL_NAMED_ENTITIES).result_set),
        mentions=frozenset(mentions_state(r) for r in
                           graph.ro_query(cypher.ALL_MENTIONS).result_set),
        edges=frozenset(entity_edge_state(r) for r in
                        graph.ro_query(cypher.ALL_ENTITY_EDGES).result_set))
