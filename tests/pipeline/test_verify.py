"""`brainstream verify` finds every kind of drift between Postgres and the graph, and
`--repair` (plus the relay) makes them agree again."""

from __future__ import annotations

import subprocess
import sys
import uuid
from typing import Any

import falkordb
import psycopg
import pytest

from pipeline.embedding.embedders import StaticEmbedder
from pipeline.embedding.identity import model_key
from pipeline.graph.falkordb.schema import NODE_LABEL, _has_index, index_rows, prepare_graph
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.kafka.io import KafkaChangeSink, make_producer
from pipeline.ops.verify import rebuild_vector_index, repair, verify
from pipeline.outbox.relay import OutboxRelay
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.pipelineutil import envelope, ingest, put
from tests.stackutil import make_settings, settings_env

pytestmark = pytest.mark.stack


def _relay(settings: Settings) -> None:
    pool = make_pool(settings, max_size=2)
    producer = make_producer(settings)
    try:
        OutboxRelay(settings, pool, FalkorGraphWriter.from_settings(settings),
                    KafkaChangeSink(producer, settings.topic_changes)).run()
    finally:
        producer.close()
        pool.close()


def test_verify_detects_and_repairs_drift(db: psycopg.Connection[Any],
                                          stack_settings: Settings) -> None:
    settings = make_settings(postgres_dsn=db.info.dsn, graph_name=f"v_{uuid.uuid4().hex[:8]}",
                             **{k: getattr(stack_settings, k) for k in
                                ("kafka_port", "falkordb_port", "redis_port")})
    prepare_graph(settings)
    ns = uuid.uuid4()
    a, b, c = (put(ns, title=t) for t in ("Alpha", "Beta", "Gamma"))
    ids = [e["data"]["id"] for e in (a, b, c)]
    links = [envelope("link.put", ns, {"from": ids[0], "to": ids[1], "relation_type": "knows",
                                       "meta": {"note": "old friends"}}),
             envelope("link.put", ns, {"from": ids[1], "to": ids[2], "relation_type": "knows",
                                       "meta": {"note": "colleagues"}})]
    ingest(settings, [a, b, c, *links])
    assert verify(settings).clean

    graph = falkordb.FalkorDB.from_url(settings.effective_falkordb_url).select_graph(
        settings.graph_name)
    graph.query("MATCH (n:Entity {id: $id}) DETACH DELETE n", {"id": ids[2]})  # missing node
    graph.query("CREATE (:Entity {id: $id, namespace: $ns, kind: 'company', title: 'Ghost'})",
                {"id": str(uuid.uuid4()), "ns": str(ns)})  # extra node
    graph.query("MATCH (n:Entity {id: $id}) SET n.title = 'Wrong'", {"id": ids[0]})
    graph.query("MATCH (:Entity {id: $a})-[e:knows]->() SET e.note = 'rewritten'",
                {"a": ids[0]})
    graph.query("MATCH (a:Entity {id: $a}), (b:Entity {id: $b}) CREATE (a)-[:hates]->(b)",
                {"a": ids[1], "b": ids[0]})  # extra edge
    drift = verify(settings)
    assert drift.nodes.missing == [ids[2]]
    assert len(drift.nodes.extra) == 1
    assert drift.nodes.stale == [ids[0]]
    assert drift.edges.missing == [(ids[1], "knows", ids[2])]
    assert drift.edges.extra == [(ids[1], "hates", ids[0])]
    assert drift.edges.stale == [(ids[0], "knows", ids[1])]

    cli = subprocess.run([sys.executable, "-m", "pipeline.cli", "verify"],
                         env={**settings_env(settings), "BRAINSTREAM_GRAPH_NAME":
                              settings.graph_name}, capture_output=True, text=True,
                         timeout=120, check=False)
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert "missing nodes" in cli.stdout

    done = repair(settings, drift)
    assert done["nodes"] == 3 and done["edges"] == 3
    _relay(settings)
    assert verify(settings).clean

    rebuild_vector_index(settings)  # drop + create clears orphan entries; still answers
    # Regression: the drop finishes in the background, and a rebuild that re-created "if
    # missing" right after it left the graph without a vector index on large graphs.
    graph = falkordb.FalkorDB.from_url(settings.effective_falkordb_url).select_graph(
        settings.graph_name)
    assert _has_index(index_rows(graph), NODE_LABEL, "embedding", "VECTOR") is not None
    after = verify(settings)
    assert after.clean and after.vector_sampled == 3


def test_graph_rebuild_and_reembed(db: psycopg.Connection[Any], stack_settings: Settings) -> None:
    from pipeline.ops.rebuild import rebuild_graph, reembed

    settings = make_settings(postgres_dsn=db.info.dsn, graph_name=f"r_{uuid.uuid4().hex[:8]}",
                             **{k: getattr(stack_settings, k) for k in
                                ("kafka_port", "falkordb_port", "redis_port")})
    prepare_graph(settings)
    ns = uuid.uuid4()
    objs = [put(ns, title=f"Object {i}", content="Some text.\n\nMore text.") for i in range(5)]
    ids = [o["data"]["id"] for o in objs]
    link = envelope("link.put", ns, {"from": ids[0], "to": ids[1], "relation_type": "knows"})
    ingest(settings, [*objs, link])
    graph = falkordb.FalkorDB.from_url(settings.effective_falkordb_url).select_graph(
        settings.graph_name)
    graph.query("MATCH (n) DETACH DELETE n")  # the graph is lost
    assert not verify(settings).clean
    assert rebuild_graph(settings) == 6
    assert verify(settings).clean
    assert graph.query("MATCH (n:Entity) RETURN count(n)").result_set == [[5]]

    before = db.execute("SELECT count(*) FROM object_embeddings"
                        " WHERE embed_status = 'done'").fetchone()
    assert reembed(settings) == 0  # the same model: every row keeps its vector
    db.execute("UPDATE object_embeddings SET model = 'static:older' WHERE id = %s", (ids[2],))
    assert reembed(settings) == 1  # only the row another model embedded
    assert reembed(settings, every=True) == before[0]
    assert db.execute("SELECT count(*) FROM object_embeddings WHERE embed_status <> 'done'"
                      " OR embedded_hash IS NULL OR model <> %s",
                      (model_key(StaticEmbedder()),)).fetchone() == (0,)
    assert verify(settings).clean
