"""Rebuilding derived state from Postgres: the whole graph, or every embedding.

Both go through the same machinery as live ingestion (outbox relay, embedding service), so a
rebuild is idempotent, safe to interrupt and re-run, and shares work with running workers.
"""

from __future__ import annotations

import time

import psycopg

from pipeline.embedding.embedders import build_embedder
from pipeline.embedding.identity import model_key
from pipeline.embedding.service import EmbeddingService, pending_count
from pipeline.graph.falkordb.schema import connect, prepare_graph
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.kafka.io import DeadLetterWriter, KafkaChangeSink, make_producer
from pipeline.ops.progress import Progress
from pipeline.outbox.relay import OutboxRelay
from pipeline.outbox.store import backlog, enqueue_visible
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings


def _drain_outbox(settings: Settings, label: str) -> None:
    """Relay the whole outbox backlog to the graph, showing progress."""
    pool = make_pool(settings, max_size=2, name="brainstream-rebuild")
    producer = make_producer(settings)
    try:
        total = backlog(pool)
        progress = Progress(label, total)
        relay = OutboxRelay(settings, pool, FalkorGraphWriter.from_settings(settings),
                            KafkaChangeSink(producer, settings.topic_changes),
                            DeadLetterWriter.of(producer, settings))
        while True:
            stats = relay.run(max_rounds=1)
            left = backlog(pool)
            progress.update(max(0, total - left))
            if left == 0:
                break
            if stats.skipped or stats.failed_rounds or not stats.rows:
                # another relay holds the lock, the graph is down, or the rows left wait out
                # their back-off (refused by the graph): wait
                time.sleep(0.5)
        progress.finish()
    finally:
        producer.close()
        pool.close()


def rebuild_graph(settings: Settings) -> int:
    """Drop the graph (a leftover entity projection of an older version with it), recreate its
    indexes, and re-project every visible object and link."""
    db = connect(settings)
    if settings.graph_name in db.list_graphs():
        db.select_graph(settings.graph_name).delete()
    prepare_graph(settings)
    with psycopg.connect(settings.effective_postgres_dsn) as conn, conn.transaction():
        nodes, edges = enqueue_visible(conn)
    _drain_outbox(settings, "graph rebuild (outbox rows)")
    return nodes + edges


def reembed(settings: Settings, *, every: bool = False) -> int:
    """Embed again every visible row whose vector another model computed (or none), with the
    configured model, then re-project; a row of this model keeps its vector. With `every`,
    every row, and nothing stored is reused (a model server that changed its weights under the
    same name and address). The number of rows marked."""
    embedder = build_embedder(settings)
    current = model_key(embedder)
    with psycopg.connect(settings.effective_postgres_dsn) as conn, conn.transaction():
        marked = conn.execute(
            "UPDATE object_embeddings e SET embed_status = 'pending', embed_attempts = 0,"
            " embed_error = NULL, embed_lease_until = NULL, queued_at = now(),"
            " embedded_hash = CASE WHEN %(every)s THEN NULL ELSE e.embedded_hash END,"
            " model = CASE WHEN %(every)s THEN NULL ELSE e.model END"
            " FROM objects o WHERE o.id = e.id AND o.deleted_at IS NULL"
            " AND (%(every)s OR e.embedding IS NULL OR e.model IS DISTINCT FROM %(model)s"
            "      OR e.embedded_hash IS DISTINCT FROM e.index_text_hash)"
            # a caller's vector (a put's `vector`) is the caller's to change, not the model's
            " AND coalesce(e.model, '') NOT LIKE 'caller:%%'",
            {"every": every, "model": current}).rowcount
    pool = make_pool(settings, max_size=2, name="brainstream-reembed")
    producer = make_producer(settings)
    progress = Progress("re-embedding (rows)", marked)
    try:
        service = EmbeddingService(settings, pool, embedder,
                                   DeadLetterWriter.of(producer, settings))
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
    _drain_outbox(settings, "graph sync (outbox rows)")
    return marked
