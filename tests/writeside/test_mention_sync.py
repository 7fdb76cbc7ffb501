"""A NODE_SYNC re-syncs its object's MENTIONS only when they may differ from the graph's: the
node is deleted, new to the graph (or a placeholder an edge created), or written since its last
sync. Any other NODE_SYNC (the one after embedding, a retry, a repair) leaves MENTIONS unread.
Real Postgres and FalkorDB; the relay runs in-process on a database and graph of the test's own,
with the real writer counting which roots' MENTIONS it was asked for."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest

from pipeline.domain.projection import MentionsState
from pipeline.graph.falkordb.schema import NODE_LABEL, connect
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.kafka.io import KafkaChangeSink, make_producer
from pipeline.ops.verify import verify
from pipeline.outbox.ops import ENTITY_SYNC, MENTIONS_SYNC, NODE_SYNC
from pipeline.outbox.relay import OutboxRelay
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.entities.conftest import db, proj_settings
from tests.entities.projutil import enqueue, entity, mention, snapshot
from tests.pipelineutil import ingest, put

pytestmark = pytest.mark.stack
__all__ = ["db", "proj_settings"]


class CountingWriter(FalkorGraphWriter):
    """The real writer, remembering whose MENTIONS the relay read."""

    asked: list[str]

    def fetch_mentions(self, root_ids: Sequence[str]) -> list[MentionsState]:
        self.asked.extend(root_ids)
        return super().fetch_mentions(root_ids)


def relay(settings: Settings) -> list[str]:
    """Drain the outbox; the roots whose MENTIONS were read."""
    writer = CountingWriter.from_settings(settings)
    writer.asked = []
    pool = make_pool(settings, max_size=2)
    producer = make_producer(settings)
    try:
        OutboxRelay(settings, pool, writer,
                    KafkaChangeSink(producer, settings.topic_changes)).run()
    finally:
        producer.close()
        pool.close()
    return writer.asked


def test_node_sync_reads_mentions_only_when_they_may_have_changed(
        db: psycopg.Connection[Any], proj_settings: Settings) -> None:
    settings = proj_settings
    a, b = uuid.uuid4(), uuid.uuid4()
    events = [put(a, title="Acme and Bolt"), put(b, title="Acme of tenant B")]
    ingest(settings, events)
    o1, b1 = (e["data"]["id"] for e in events)
    acme, bolt, acme_b = entity(db, a, "Acme"), entity(db, a, "Bolt"), entity(db, b, "Acme")
    mention(db, a, o1, acme)
    mention(db, a, o1, bolt, start=9)
    mention(db, b, b1, acme_b)
    enqueue(db, a, MENTIONS_SYNC, [o1])
    enqueue(db, b, MENTIONS_SYNC, [b1])
    enqueue(db, a, ENTITY_SYNC, [acme, bolt])
    enqueue(db, b, ENTITY_SYNC, [acme_b])
    relay(settings)
    before = snapshot(settings)
    assert before.mention_pairs() == {(o1, str(acme)), (o1, str(bolt)), (b1, str(acme_b))}

    # the node is in the graph and nothing of it changed: its MENTIONS are not read
    enqueue(db, a, NODE_SYNC, [o1])
    assert o1 not in relay(settings)
    assert snapshot(settings) == before

    # written since its last sync: MENTIONS follow (they carry the rows' updated_at)
    db.execute("UPDATE objects SET updated_at = updated_at + interval '1 second'"
               " WHERE id = %s", (o1,))
    enqueue(db, a, NODE_SYNC, [o1])
    assert o1 in relay(settings)
    assert verify(settings).clean

    # a MENTIONS_SYNC applied while the node was not in the graph could not attach; the node's
    # own sync, even onto a placeholder an edge created meanwhile, brings them
    graph = connect(settings).select_graph(settings.graph_name)
    graph.query("MATCH (n {id: $id}) DETACH DELETE n", {"id": o1})
    enqueue(db, a, MENTIONS_SYNC, [o1])
    relay(settings)
    assert {(r, e) for r, e in snapshot(settings).mention_pairs() if r == o1} == set()
    graph.query(f"CREATE (:{NODE_LABEL} {{id: $id, namespace: $ns}})", {"id": o1, "ns": str(a)})
    enqueue(db, a, NODE_SYNC, [o1])
    assert o1 in relay(settings)
    after = snapshot(settings)
    assert after.mention_pairs() == before.mention_pairs()
    assert {m for m in after.mentions if m.root_id == b1} == \
        {m for m in before.mentions if m.root_id == b1}  # the other tenant's, untouched

    # deleted: its entities lose their last live mention and leave the graph
    db.execute("UPDATE objects SET deleted_at = now() WHERE id = %s", (o1,))
    enqueue(db, a, NODE_SYNC, [o1])
    assert o1 in relay(settings)
    assert snapshot(settings).entity_ids() == {str(acme_b)}
    assert verify(settings).clean
