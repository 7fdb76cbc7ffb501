"""The proposal pass's queue (migration 0028) on real Postgres: every entity created is queued by
the insert itself, in each tenant; the pass examines each once; and marking an entity examined
writes nothing to its row (before 0028 it was a non-HOT update that re-inserted the entity into
every index of `entities`, its name vector's HNSW index among them)."""

from __future__ import annotations

import random
import uuid
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from pipeline.entities.merging import propose_if_due
from pipeline.entities.resolving import ResolveConfig
from tests.pipeline.conftest import db
from tests.stackutil import make_settings
from tests.writeside.pools import pool

pytestmark = pytest.mark.stack
__all__ = ["db", "pool"]


def _versions(conn: psycopg.Connection[Any]) -> dict[uuid.UUID, tuple[str, str]]:
    """Each entity's row version: (ctid, xmin) changes whenever the row is written."""
    return {eid: (str(ctid), str(xmin)) for eid, ctid, xmin in conn.execute(
        "SELECT id, ctid, xmin FROM entities").fetchall()}


def test_each_new_entity_is_queued_and_examined_once_without_writing_its_row(
        db: psycopg.Connection[Any], pool: ConnectionPool) -> None:
    dim = make_settings().vector_dim
    rng = random.Random(7)
    tenants = {uuid.uuid4(): 12, uuid.uuid4(): 8}
    for ns, count in tenants.items():
        ids = [uuid.uuid4() for _ in range(count)]
        with db.cursor() as cur:
            cur.executemany("INSERT INTO entities (id, namespace_id, name, norm, label)"
                            " VALUES (%s, %s, %s, %s, 'NAME')",
                            [(eid, ns, eid.hex, eid.hex) for eid in ids])
            cur.executemany(
                "INSERT INTO entity_name_vectors (entity_id, namespace_id, embedding)"
                " VALUES (%s, %s, %s::vector)",
                [(eid, ns, "[" + ",".join(f"{rng.uniform(-1, 1):.4f}" for _ in range(dim)) + "]")
                 for eid in ids])
    queued = dict(db.execute("SELECT namespace_id, count(*) FROM entity_proposal_queue"
                             " GROUP BY namespace_id").fetchall())
    assert queued == tenants
    before = _versions(db)

    stats = propose_if_due(pool, batch=5, config=ResolveConfig())
    assert stats is not None and stats.examined == sum(tenants.values()) and stats.merged == 0
    assert db.execute("SELECT count(*) FROM entity_proposal_queue").fetchone() == (0,)
    assert propose_if_due(pool, batch=5, config=ResolveConfig()) is None  # examined once
    assert _versions(db) == before, "the pass wrote entity rows"
