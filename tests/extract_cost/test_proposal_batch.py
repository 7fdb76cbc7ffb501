"""The proposal pass over a batch (pipeline/entities/proposals.py) on real Postgres: a batch is
read in a few statements, not several per entity, and deciding its entities in turn over
those reads gives what examining them one at a time gives, also when a merge early in the batch
changes what a later entity finds; each tenant's entities are proposed only with its own."""

from __future__ import annotations

import random
import uuid
from typing import Any

import psycopg
import pytest
from pgvector.psycopg import register_vector

from pipeline.entities.merging import propose_for, propose_pending
from pipeline.entities.names import normalise
from tests.pipeline.conftest import db
from tests.stackutil import make_settings

pytestmark = pytest.mark.stack
__all__ = ["db"]


class Counting(psycopg.Connection[Any]):
    """A connection that counts the statements sent through it."""

    sent = 0

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        self.sent += 1
        return super().execute(query, params, **kwargs)


def _vector(rng: random.Random) -> str:
    dim = make_settings().vector_dim
    return "[" + ",".join(f"{rng.uniform(-1, 1):.4f}" for _ in range(dim)) + "]"


def _add(conn: psycopg.Connection[Any], ns: uuid.UUID, name: str, part_count: int, *,
         minute: int, queued: bool, rng: random.Random) -> uuid.UUID:
    """An entity with a name vector, created `minute` minutes after the epoch of the test (the
    pass takes its queue oldest first)."""
    entity_id = uuid.uuid4()
    conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label, part_count,"
                 " created_at) VALUES (%s, %s, %s, %s, 'NAME', %s,"
                 " timestamptz '2026-01-01' + %s * interval '1 minute')",
                 (entity_id, ns, name, normalise(name), part_count, minute))
    conn.execute("INSERT INTO entity_name_vectors (entity_id, namespace_id, embedding)"
                 " VALUES (%s, %s, %s::vector)", (entity_id, ns, _vector(rng)))
    if not queued:
        conn.execute("DELETE FROM entity_proposal_queue WHERE entity_id = %s", (entity_id,))
    return entity_id


# Existing entities, then new ones in the order the pass examines them. "São Paulo" folds to
# the existing "Sao Paulo" and merges (it has more mentions, so it survives); "Sao-Paulo" and
# "São-Paulo" fold to the same name and are decided after that merge; "Globex Corporation" is
# held with "Globex" (a company suffix: 0.93).
EXISTING = [("Sao Paulo", 1), ("Globex", 2)]
NEW = [("São Paulo", 3), ("Sao-Paulo", 1), ("Globex Corporation", 1), ("São-Paulo", 2)]


def _outcome(conn: psycopg.Connection[Any], ns: uuid.UUID) -> tuple[list[Any], list[Any]]:
    """The namespace's merges and held pairs, by name."""
    merged = conn.execute(
        "SELECT f.name, i.name, m.method FROM entity_merges m JOIN entities f ON f.id = m.from_id"
        " JOIN entities i ON i.id = m.into_id WHERE m.namespace_id = %s ORDER BY m.id",
        (ns,)).fetchall()
    held = conn.execute(
        "SELECT least(a.name, b.name), greatest(a.name, b.name), d.status, d.method"
        " FROM entity_edges d JOIN entities a ON a.id = d.from_id JOIN entities b"
        " ON b.id = d.to_id WHERE d.namespace_id = %s AND d.edge_type = 'POSSIBLY_SAME'"
        " ORDER BY 1, 2", (ns,)).fetchall()
    return merged, held


def test_a_batch_decides_as_one_entity_at_a_time_in_far_fewer_statements(
        db: psycopg.Connection[Any]) -> None:
    register_vector(db)
    rng = random.Random(11)
    batched, single = uuid.uuid4(), uuid.uuid4()
    noise = [uuid.uuid4().hex[:12] for _ in range(120)]  # names nothing resembles
    new_ids: dict[uuid.UUID, list[uuid.UUID]] = {}
    for ns, queued in ((batched, True), (single, False)):
        for name, count in EXISTING:
            _add(db, ns, name, count, minute=0, queued=False, rng=rng)
        new_ids[ns] = [_add(db, ns, name, count, minute=i + 1, queued=queued, rng=rng)
                       for i, (name, count) in enumerate([*NEW, *((n, 1) for n in noise)])]

    with Counting.connect(db.info.dsn, autocommit=True) as conn:
        register_vector(conn)  # as the worker's pool does
        conn.sent = 0
        proposals = []
        while batch := propose_pending(conn, batch=100):
            proposals += batch
        sent = conn.sent
    # the reference: the same entities of the other tenant, examined one call each
    for entity_id in new_ids[single]:
        propose_for(db, single, [entity_id])

    examined = len(new_ids[batched])
    # one entity at a time sent seven statements or more per entity
    assert sent < examined, f"{sent} statements for {examined} entities"
    assert {p.entity_id for p in proposals} <= set(new_ids[batched])
    assert db.execute("SELECT count(*) FROM entity_proposal_queue").fetchone() == (0,)

    merged, held = _outcome(db, batched)
    assert (merged, held) == _outcome(db, single)
    assert ("Sao Paulo", "São Paulo", "fold") in merged  # the early merge...
    assert {f for f, _, _ in merged} >= {"Sao Paulo", "Sao-Paulo"}  # ...and those after it
    assert ("Globex", "Globex Corporation", "held", "prefix") in held
    # each tenant's pairs are its own
    for ns in (batched, single):
        foreign = db.execute(
            "SELECT count(*) FROM entity_edges d JOIN entities a ON a.id = d.from_id"
            " JOIN entities b ON b.id = d.to_id WHERE d.namespace_id = %s"
            " AND (a.namespace_id <> %s OR b.namespace_id <> %s)", (ns, ns, ns)).fetchone()
        assert foreign == (0,)
