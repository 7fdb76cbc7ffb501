"""The graph holds objects and links, never the entity layer (docs/architecture.md, "The graph
holds objects and links"), on the real stack: documents whose entities are extracted, related,
proposed and merged leave no NamedEntity node, MENTIONS or entity edge in the graph and no
outbox row for it; what an older version projected is deleted by `brainstream migrate`
(`prepare_graph`) and reported and deleted by `verify --repair`, the objects and links kept;
migration 0043 discards that version's pending entity rows. Two tenants."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pipeline.entities.merging import propose_all
from pipeline.entities.resolving import ResolveConfig
from pipeline.entities.stage import ExtractionStage
from pipeline.graph.falkordb import schema
from pipeline.graph.falkordb.schema import NODE_LABEL, RETIRED_ENTITY_LABEL, connect
from pipeline.ops.verify import repair, verify
from pipeline.outbox import store as outbox
from pipeline.outbox.ops import EDGE_SYNC, NODE_SYNC, RETIRED_OPS
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.entities.projutil import graph_shape, relay
from tests.entities.stageutil import CapsExtractor, q
from tests.pipelineutil import envelope, ingest, put

pytestmark = pytest.mark.stack
MIGRATION = Path(__file__).resolve().parents[2] / "migrations" / "0043_outbox_one_lane.sql"


def _documents(settings: Settings) -> tuple[uuid.UUID, uuid.UUID, list[str]]:
    """Tenant A: three documents naming people (one states a triple) and a link; tenant B: one.
    Extracted (test extractor), proposed and projected. (A, B, A's ids)."""
    a, b = uuid.uuid4(), uuid.uuid4()
    docs = [put(a, title="about Ada Lovelace", content="then Babbage likes Menabrea"),
            put(a, title="letters", content="Babbage wrote to Ada Lovelace and AdaLovelace"),
            put(a, title="plain", content="nothing named here")]
    ids = [e["data"]["id"] for e in docs]
    link = envelope("link.put", a, {"from": ids[0], "to": ids[1], "relation_type": "cites"})
    ingest(settings, [*docs, put(b, title="about Babbage"), link])
    pool = make_pool(settings, max_size=2)
    try:
        ExtractionStage(settings, pool, CapsExtractor()).run()
        propose_all(pool, batch=100, config=ResolveConfig.from_settings(settings))
    finally:
        pool.close()
    relay(settings)
    return a, b, ids


def test_extracted_entities_never_reach_the_graph(db: psycopg.Connection[Any],
                                                 proj_settings: Settings) -> None:
    a, b, _ = _documents(proj_settings)
    # Postgres holds the entity layer: entities of both tenants, CO_OCCURS and RELATES edges
    kinds = dict(q(proj_settings, "SELECT edge_type, count(*) FROM entity_edges GROUP BY 1"))
    assert kinds.get("CO_OCCURS", 0) > 0 and kinds.get("RELATES", 0) > 0, kinds
    named = {ns for (ns,) in q(proj_settings, "SELECT DISTINCT namespace_id FROM entities")}
    assert named == {a, b}
    # the graph holds the objects and their link only
    nodes, edges = graph_shape(proj_settings)
    assert nodes == {NODE_LABEL: 4} and edges == {"cites": 1}
    # and nothing was asked of the relay for the entities
    ops = {op for (op,) in q(proj_settings, "SELECT DISTINCT op FROM outbox")}
    assert ops == {NODE_SYNC, EDGE_SYNC}
    assert verify(proj_settings).clean


def _old_projection(settings: Settings, ns: uuid.UUID, root: str) -> None:
    """What an older version's relay and `prepare_graph` wrote: two NamedEntity nodes with a
    MENTIONS from `root` and a CO_OCCURS between them, a unique constraint and range indexes."""
    graph = connect(settings).select_graph(settings.graph_name)
    label = RETIRED_ENTITY_LABEL
    for prop in ("id", "namespace"):
        graph.query(f"CREATE INDEX FOR (n:{label}) ON (n.{prop})")
    graph.create_node_unique_constraint(label, "id")
    schema.wait_operational(graph, timeout=30)
    graph.query(f"MATCH (o:{NODE_LABEL} {{id: $root}}) "
                f"CREATE (o)-[:MENTIONS {{count: 1}}]->(x:{label} {{id: $x, namespace: $ns}}),"
                f" (x)-[:CO_OCCURS {{weight: 1.0}}]->(:{label} {{id: $y, namespace: $ns}})",
                {"root": root, "x": str(uuid.uuid4()), "y": str(uuid.uuid4()), "ns": str(ns)})


def _label_schema(settings: Settings) -> list[str]:
    graph = connect(settings).select_graph(settings.graph_name)
    found = [f"index {r['label']}" for r in schema.index_rows(graph)
             if r["label"] == RETIRED_ENTITY_LABEL]
    return found + [f"constraint {c.get('label')}" for c in graph.list_constraints()
                    if c.get("label") == RETIRED_ENTITY_LABEL]


def test_an_older_projection_is_deleted_by_migrate_and_by_repair(
        db: psycopg.Connection[Any], proj_settings: Settings,
        monkeypatch: pytest.MonkeyPatch) -> None:
    a, _, ids = _documents(proj_settings)
    monkeypatch.setattr(schema, "_DROP_BATCH", 1)  # a big projection goes in steps
    _old_projection(proj_settings, a, ids[0])
    nodes, edges = graph_shape(proj_settings)
    assert nodes[RETIRED_ENTITY_LABEL] == 2 and edges["MENTIONS"] == 1
    assert _label_schema(proj_settings)

    schema.prepare_graph(proj_settings)  # what `brainstream migrate` runs on every graph
    assert graph_shape(proj_settings) == ({NODE_LABEL: 4}, {"cites": 1})
    assert _label_schema(proj_settings) == []
    schema.prepare_graph(proj_settings)  # idempotent

    _old_projection(proj_settings, a, ids[1])
    drift = verify(proj_settings)
    assert not drift.clean and drift.retired_entities == 2
    assert drift.nodes.clean and drift.edges.clean
    assert repair(proj_settings, drift)["retired_entities"] == 2
    assert graph_shape(proj_settings) == ({NODE_LABEL: 4}, {"cites": 1})
    assert verify(proj_settings).clean


def test_the_migration_discards_the_pending_entity_rows(db: psycopg.Connection[Any]) -> None:
    ns = uuid.uuid4()
    rows = [outbox.Entry(ns, uuid.uuid4(), op) for op in (*RETIRED_OPS, *RETIRED_OPS)]
    outbox.enqueue_many(db, [*rows, outbox.Entry(ns, uuid.uuid4(), NODE_SYNC)])
    db.execute("UPDATE outbox SET failed_at = now() WHERE id = (SELECT min(id) FROM outbox)")
    text = MIGRATION.read_text()
    discard = text[text.index("UPDATE outbox"):].split(";")[0]  # (the rest: the indexes)
    db.execute(discard)
    pending = db.execute("SELECT op FROM outbox WHERE done_at IS NULL").fetchall()
    assert pending == [(NODE_SYNC,)]
