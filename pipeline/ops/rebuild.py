"""Rebuilding derived state from Postgres: the whole graph, or every embedding.

Both go through the same machinery as live ingestion (outbox relay, embedding service), so a
rebuild is idempotent, safe to interrupt and re-run, and shares work with running workers.
"""

from __future__ import annotations

import time

import psycopg

from pipeline.domain.settings import Settings
from pipeline.embedding.embedders import build_embedder
from pipeline.embedding.service import EmbeddingService, pending_count
from pipeline.graph.falkordb.schema import connect, prepare_graph
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.ingest.batch import EDGE_SYNC, NODE_SYNC
from pipeline.kafka.io import DeadLetterWriter, KafkaChangeSink, make_producer
from pipeline.ops.progress import Progress
from pipeline.outbox.relay import OutboxRelay, backlog
from pipeline.stores.postgres.pool import make_pool


def _drain_outbox(settings: Settings, progress: Progress, total: int) -> None:
    pool = make_pool(settings, max_size=2, name="brainstream-rebuild")
    producer = make_producer(settings)
    try:
        relay = OutboxRelay(settings, pool, FalkorGraphWriter.from_settings(settings),
                            KafkaChangeSink(producer, settings.topic_changes))
        while True:
            stats = relay.run(max_rounds=1)
            left = backlog(pool)
            progress.update(max(0, total - left))
            if left == 0:
                break
            if stats.skipped or stats.failed_rounds:
                time.sleep(0.5)  # another relay holds the lock, or the graph is down: wait
    finally:
        producer.close()
        pool.close()
    progress.finish()


def rebuild_graph(settings: Settings) -> int:
    """Drop the graph, recreate its indexes, and re-project every visible object and link."""
    db = connect(settings)
    if settings.graph_name in db.list_graphs():
        db.select_graph(settings.graph_name).delete()
    prepare_graph(settings)
    with psycopg.connect(settings.effective_postgres_dsn) as conn, conn.transaction():
        nodes = conn.execute(
            "INSERT INTO outbox (namespace_id, aggregate_id, op)"
            " SELECT namespace_id, id, %s FROM objects"
            " WHERE parent_id IS NULL AND deleted_at IS NULL", (NODE_SYNC,)).rowcount
        edges = conn.execute(
            "INSERT INTO outbox (namespace_id, aggregate_id, op, payload)"
            " SELECT namespace_id, from_id, %s, jsonb_build_object('from', from_id::text,"
            " 'relation_type', relation_type, 'to', to_id::text) FROM links"
            " WHERE deleted_at IS NULL", (EDGE_SYNC,)).rowcount
    pending = _outbox_total(settings)
    _drain_outbox(settings, Progress("graph rebuild (outbox rows)", pending), pending)
    return nodes + edges


def _outbox_total(settings: Settings) -> int:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute("SELECT count(*) FROM outbox WHERE done_at IS NULL").fetchone()
    return int(row[0]) if row else 0


def reembed(settings: Settings) -> int:
    """Mark every visible row for embedding with the configured model, embed, re-project."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn, conn.transaction():
        marked = conn.execute(
            "UPDATE objects SET embed_status = 'pending', embed_attempts = 0, embed_error = NULL,"
            " embedded_hash = NULL, embed_lease_until = NULL WHERE deleted_at IS NULL").rowcount
    pool = make_pool(settings, max_size=2, name="brainstream-reembed")
    producer = make_producer(settings)
    progress = Progress("re-embedding (rows)", marked)
    try:
        service = EmbeddingService(settings, pool, build_embedder(settings),
                                   DeadLetterWriter(producer, settings.topic_dlq))
        while True:
            service.run(max_batches=1)
            left = pending_count(pool)
            progress.update(marked - left)
            if left == 0:
                break
    finally:
        producer.close()
        pool.close()
    progress.finish()
    total = _outbox_total(settings)
    _drain_outbox(settings, Progress("graph sync (outbox rows)", total), total)
    return marked
