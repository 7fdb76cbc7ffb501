"""Curators' decisions survive a replay, on the real stack: a merge (tenant A) and a refusal
(tenant B) made through the API are published as `brainstream.entity.decision` events, so
`brainstream replay` into a new generation re-derives the entities from the content and applies
the decisions again: the merge with its alias and history, the refusal as a refused pair the
proposal pass leaves alone; the new generation's graph agrees (verify clean).

Everything runs on a database, graph and topics of the test's own (the replay in-process, the
heuristic extractor), so the session's pipeline never touches them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import falkordb
import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg import sql

from api.app import create_app
from pipeline.entities.extractors import build_extractor
from pipeline.entities.ids import entity_id
from pipeline.entities.merging import propose_all
from pipeline.entities.resolving import ResolveConfig
from pipeline.entities.stage import ExtractionStage
from pipeline.generations.active import active_generation
from pipeline.kafka.topics import ensure_topics
from pipeline.ops.replay import Replay
from pipeline.ops.verify import verify
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.entities.projutil import settings_for
from tests.entities.stageutil import apply, put, q
from tests.pipeline.replayutil import publisher

pytestmark = pytest.mark.stack


@pytest.fixture()
def own(db: psycopg.Connection[Any], stack_settings: Settings) -> Iterator[Settings]:
    """Settings on the fresh database `db`, a graph and topics of this test's own, curators of
    two tenants; the replay's generation database and graph are dropped afterwards."""
    tag = uuid.uuid4().hex[:8]
    settings = settings_for(db.info.dsn, stack_settings).model_copy(update={
        "topic_events": f"d1-events-{tag}", "topic_dlq": f"d1-dlq-{tag}",
        "topic_changes": f"d1-changes-{tag}"})
    ensure_topics(settings)
    yield settings
    with psycopg.connect(stack_settings.effective_postgres_dsn, autocommit=True) as conn:
        for n in range(2, 4):
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(f"{db.info.dbname}_g{n}")))
    graphs = falkordb.FalkorDB.from_url(stack_settings.effective_falkordb_url)
    for name in graphs.list_graphs():
        if name.startswith(settings.graph_name):
            graphs.select_graph(name).delete()


def live_entities(settings: Settings, ns: uuid.UUID) -> set[str]:
    return {r[0] for r in q(settings, "SELECT norm FROM entities WHERE namespace_id = %s"
                            " AND merged_into IS NULL", ns)}


def test_a_merge_and_a_refusal_survive_a_replay(own: Settings) -> None:
    settings = own
    a, b = uuid.uuid4(), uuid.uuid4()
    events = [put(a, uuid.uuid4(), title="notes", content="Marie Curie won twice."),
              put(a, uuid.uuid4(), title="letters", content="Maria Sklodowska left Warsaw."),
              put(b, uuid.uuid4(), title="books", content="Leo Tolstoy wrote novels."),
              put(b, uuid.uuid4(), title="essays", content="Leo Tolstoi wrote essays.")]
    pub = publisher(settings)
    for event in events:
        pub.send(event, event["data"]["id"])
    pub.close()
    # generation 1: the same events, extracted and proposed as the workers would
    apply(settings, events)
    pool = make_pool(settings, max_size=2)
    try:
        ExtractionStage(settings, pool, build_extractor(settings)).run()
        propose_all(pool, batch=100, config=ResolveConfig.from_settings(settings))
    finally:
        pool.close()
    curie, sklodowska = entity_id(a, "marie curie"), entity_id(a, "maria sklodowska")
    tolstoy, tolstoi = entity_id(b, "leo tolstoy"), entity_id(b, "leo tolstoi")
    assert {"marie curie", "maria sklodowska"} <= live_entities(settings, a)
    assert {"leo tolstoy", "leo tolstoi"} <= live_entities(settings, b)

    keys = {"ka": {"name": "Ada", "scopes": {str(a): ["admin"]}},
            "kb": {"name": "Bo", "scopes": {str(b): ["admin"]}}}
    api = settings.model_copy(update={"api_keys": keys})
    with TestClient(create_app(api)) as client:
        merged = client.post("/v1/entities/merge", headers={"Authorization": "Bearer ka"},
                             json={"from": str(sklodowska), "into": str(curie)})
        assert merged.status_code == 200, merged.text
        refused = client.post(f"/v1/entities/possibly_same/{tolstoi}/{tolstoy}",
                              headers={"Authorization": "Bearer kb"},
                              json={"decision": "refuse"})
        assert refused.status_code == 200, refused.text
        # another tenant's curator cannot decide on A's entities (404: not in its namespace)
        other = client.post("/v1/entities/merge", headers={"Authorization": "Bearer kb"},
                            json={"from": str(curie), "into": str(sklodowska)})
        assert other.status_code == 404, other.text

    report = Replay(settings, idle_seconds=0.5).run()
    assert report.switched and report.rejected == {}
    gen = active_generation(settings)
    assert gen.id == report.generation
    new = gen.settings(settings)

    # A: the merge, its history and the alias, re-applied from the topic
    assert q(new, "SELECT merged_into FROM entities WHERE id = %s", sklodowska) == [(curie,)]
    assert q(new, "SELECT decided_by, method FROM entity_merges WHERE namespace_id = %s"
             " AND from_id = %s AND into_id = %s", a, sklodowska, curie) == [("Ada", "person")]
    assert ("maria sklodowska", "merge") in set(q(
        new, "SELECT norm, source FROM entity_aliases WHERE entity_id = %s", curie))
    assert q(new, "SELECT status, decision FROM entity_decisions WHERE namespace_id = %s",
             a) == [("applied", "merge")]
    # B: refused, never merged; and nothing of A's decision reached B
    low, high = sorted((tolstoy, tolstoi), key=lambda u: u.bytes)
    assert q(new, "SELECT status FROM entity_edges WHERE from_id = %s AND to_id = %s"
             " AND edge_type = 'POSSIBLY_SAME'", low, high) == [("refused",)]
    assert q(new, "SELECT count(*) FROM entity_merges WHERE namespace_id = %s", b) == [(0,)]
    assert {"leo tolstoy", "leo tolstoi"} <= live_entities(new, b)
    assert q(new, "SELECT namespace_id, decision FROM entity_decisions ORDER BY decision"
             ) == [(a, "merge"), (b, "refuse")]
    # the new generation's graph holds the survivor, not the merged entity
    assert verify(new).clean
