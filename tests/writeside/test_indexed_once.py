"""`object.indexed` is announced once per put: by the last node row of the object, never also
by an earlier one that happened to read the state after the embedding committed. The race is
made deterministic: the put's node row is claimed, then the embedding's row is enqueued, then
the claimed row is applied. Real Postgres and FalkorDB, the relay in-process."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.kafka.io import KafkaChangeSink, make_producer
from pipeline.outbox import store
from pipeline.outbox.ops import NODE_SYNC
from pipeline.outbox.relay import OutboxRelay
from pipeline.outbox.relay_stats import RelayStats
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.entities.conftest import db, proj_settings
from tests.entities.projutil import enqueue
from tests.pipelineutil import ingest, put

pytestmark = pytest.mark.stack
__all__ = ["db", "proj_settings"]


def test_an_object_is_announced_by_its_last_node_row_only(
        db: psycopg.Connection[Any], proj_settings: Settings) -> None:
    settings = proj_settings
    a, b = uuid.uuid4(), uuid.uuid4()
    events = [put(a, title="Raced"), put(b, title="Alone in tenant B")]
    ingest(settings, events)  # embedded and projected: every object's state is done
    raced, alone = (uuid.UUID(e["data"]["id"]) for e in events)
    pool = make_pool(settings, max_size=2)
    producer = make_producer(settings)
    try:
        relay = OutboxRelay(settings, pool, FalkorGraphWriter.from_settings(settings),
                            KafkaChangeSink(producer, settings.topic_changes))
        enqueue(db, a, NODE_SYNC, [raced])  # the put's row
        enqueue(db, b, NODE_SYNC, [alone])
        with pool.connection() as conn:
            claimed = store.claim_due(conn, 10)
        assert {row.aggregate_id for row in claimed} >= {raced, alone}
        enqueue(db, a, NODE_SYNC, [raced])  # the embedding's row, committed after the claim
        changes = relay._apply(claimed, RelayStats())
        announced = {c.key for c in changes if c.type == "object.indexed"}
        assert str(alone) in announced  # nothing follows it: announced now
        assert str(raced) not in announced  # its later row will announce it

        # the later row, claimed with nothing behind it, announces it (once)
        with pool.connection() as conn:
            store.mark_done(conn, [row.id for row in claimed])
            later = store.claim_due(conn, 10)
        assert [row.aggregate_id for row in later] == [raced]
        changes = relay._apply(later, RelayStats())
        assert [c.key for c in changes if c.type == "object.indexed"] == [str(raced)]
    finally:
        producer.close()
        pool.close()
