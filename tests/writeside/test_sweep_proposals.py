"""The sweep's proposal step (`pipeline/entities/merging.py: propose_if_due`) on real Postgres:
it claims nothing while no entity waits for the resolver's pass, and still finds the entities a
worker created and died before examining; with a maximum delay it waits while extraction has rows
pending, until its oldest entity has waited that long."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from pipeline.entities.merging import propose_if_due
from pipeline.entities.names import normalise
from pipeline.entities.resolving import ResolveConfig
from tests.pipeline.conftest import db
from tests.writeside.pools import pool

pytestmark = pytest.mark.stack
__all__ = ["db", "pool"]


def _entity(conn: psycopg.Connection[Any], ns: uuid.UUID, name: str, *,
            merged_into: uuid.UUID | None = None, examined: bool = False) -> uuid.UUID:
    """An entity as extraction's write-back leaves it: not examined (in the pass's queue),
    unless `examined`."""
    eid = uuid.uuid4()
    conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label, part_count,"
                 " merged_into) VALUES (%s, %s, %s, %s, 'NAME', 1, %s)",
                 (eid, ns, name, normalise(name), merged_into))
    if examined:
        conn.execute("DELETE FROM entity_proposal_queue WHERE entity_id = %s", (eid,))
    return eid


def _proposed(conn: psycopg.Connection[Any], eid: uuid.UUID) -> bool:
    row = conn.execute("SELECT NOT EXISTS (SELECT 1 FROM entity_proposal_queue"
                       " WHERE entity_id = %s)", (eid,)).fetchone()
    return bool(row and row[0])


def test_the_sweep_claims_only_when_an_entity_waits(db: psycopg.Connection[Any],
                                                    pool: ConnectionPool) -> None:
    config = ResolveConfig()
    assert propose_if_due(pool, batch=50, config=config) is None  # nothing ever extracted

    ns = uuid.uuid4()
    survivor = _entity(db, ns, "Acme Corporation", examined=True)
    _entity(db, ns, "Acme Corp", merged_into=survivor)  # merged away: never examined again
    assert propose_if_due(pool, batch=50, config=config) is None

    # a worker created these and was killed before its own pass: the next tick examines them
    orphans = [_entity(db, ns, "Globex Industries"), _entity(db, ns, "Initech Systems")]
    stats = propose_if_due(pool, batch=50, config=config)
    assert stats is not None and stats.examined == 2
    assert all(_proposed(db, eid) for eid in orphans)
    assert propose_if_due(pool, batch=50, config=config) is None  # examined once


def _pending_row(conn: psycopg.Connection[Any], ns: uuid.UUID) -> uuid.UUID:
    """A part as a bulk load writes it: its trigger leaves it pending for extraction."""
    oid = uuid.uuid4()
    conn.execute("INSERT INTO objects (id, namespace_id, kind, title, index_text_hash)"
                 " VALUES (%s, %s, 'doc', 'waiting for extraction', md5(%s))",
                 (oid, ns, str(oid)))
    return oid


def test_the_pass_waits_for_pending_extraction_at_most_its_delay(
        db: psycopg.Connection[Any], pool: ConnectionPool) -> None:
    config = ResolveConfig()
    ns, other = uuid.uuid4(), uuid.uuid4()
    waiting = _entity(db, ns, "Globex Industries")
    row = _pending_row(db, other)  # another tenant's part: extraction is global

    assert propose_if_due(pool, batch=50, config=config, max_delay=60.0) is None
    assert not _proposed(db, waiting)
    # the oldest waiting entity has waited longer than the delay: the pass runs all the same
    db.execute("UPDATE entity_proposal_queue SET created_at = now() - interval '61 seconds'"
               " WHERE entity_id = %s", (waiting,))
    stats = propose_if_due(pool, batch=50, config=config, max_delay=60.0)
    assert stats is not None and stats.examined == 1 and _proposed(db, waiting)

    fresh = _entity(db, ns, "Initech Systems")
    assert propose_if_due(pool, batch=50, config=config, max_delay=60.0) is None
    db.execute("UPDATE entity_extraction SET status = 'done' WHERE row_id = %s", (row,))
    stats = propose_if_due(pool, batch=50, config=config, max_delay=60.0)  # extraction drained
    assert stats is not None and stats.examined == 1 and _proposed(db, fresh)
