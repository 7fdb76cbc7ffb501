"""The proposal pass's kNN is planned for its parameters every time: psycopg prepares a statement
after five executions, and the generic plan Postgres then kept sorted the namespace's every name
vector per entity instead of asking the HNSW index (it cannot know that `LIMIT %s` is 5). Real
Postgres, in-process stage and name vectors (tests/entities/stageutil.py's `CapsExtractor`)."""

from __future__ import annotations

import uuid

from psycopg_pool import ConnectionPool

from pipeline.embedding.embedders import StaticEmbedder
from pipeline.entities.name_vectors import embed_names
from pipeline.entities.resolving import lookup
from pipeline.entities.stage import ExtractionStage
from pipeline.entities.store import resolution_batch
from pipeline.postgres.plans import run
from pipeline.settings import Settings
from tests.entities.stageutil import CapsExtractor, apply, entities, put


def test_the_pass_knn_is_never_prepared(edb: Settings, epool: ConnectionPool) -> None:
    ns, other = uuid.uuid4(), uuid.uuid4()
    docs = [(ns, "Kepler met Brahe in Prague"), (ns, "Johannes Kepler wrote to Galileo"),
            (ns, "Brahe observed Mars"), (other, "Kepler in another tenant")]
    ids = [uuid.uuid4() for _ in docs]
    apply(edb, [put(n, i, title="t", content=text) for (n, text), i in zip(docs, ids,
                                                                            strict=True)])
    ExtractionStage(edb, epool, CapsExtractor()).run(ids)
    assert embed_names(epool, StaticEmbedder(), None, batch=100) >= 6

    named = entities(edb, ns)
    with epool.connection() as conn:
        rows = run(conn, resolution_batch.records([eid for eid, _ in named.values()]))
        batch = sorted(rows.values(), key=lambda e: e.name)
        assert all(e.has_embedding for e in batch)
        for _ in range(8):  # past psycopg's prepare threshold (5)
            found = run(conn, resolution_batch.look_up(batch, [lookup(e.name) for e in batch],
                                                       limit=20, k=3))
        prepared = [s for (s,) in conn.execute("SELECT statement FROM pg_prepared_statements")]
    assert prepared, "the lookup's other statement is prepared as usual"
    assert not [s for s in prepared if "entity_name_vectors v" in s]
    # the kNN still answers: each entity's nearest live names of its own namespace, not itself
    kepler = named["kepler"][0]
    near = [c for c in found[kepler].rows if c.via == "embedding"]
    assert near and kepler not in {c.entity_id for c in near}
    assert {c.entity_id for c in near} <= {eid for eid, _ in named.values()}
