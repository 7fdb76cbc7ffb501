"""`brainstream entities backfill`: extract the entities of rows written before the entity layer
existed (or whose extraction failed), in-process, with a progress line; then embed the names left
without a vector (the name embedder was down when the proposal pass examined them, or migration
0039 dropped vectors of another model's dimension; `pipeline/entities/name_vectors.py`).

Safe beside running workers: the stage claims rows with a lease and writes back with a
compare-and-set, so a row is extracted once whoever gets it first. The graph gets the entities
through the outbox, from the pipeline's relay (or `brainstream graph rebuild`).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import psycopg

from pipeline.embedding.embedders import build_name_embedder
from pipeline.entities.extractors import build_extractor
from pipeline.entities.name_vectors import embed_names
from pipeline.entities.stage import ExtractionStage, ExtractStats
from pipeline.entities.store import extraction
from pipeline.kafka.io import DeadLetterWriter, make_producer
from pipeline.ops.progress import Progress
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings


@dataclass(frozen=True)
class BackfillReport:
    marked: int  # rows this backfill set pending
    stats: ExtractStats
    names_embedded: int = 0  # entities that got their name vector here


def backfill(settings: Settings, namespace: uuid.UUID | None = None) -> BackfillReport:
    """Mark the live rows (of `namespace`, or all) without a done extraction pending, then run
    the stage until no row is pending (rows of other namespaces pending anyway are extracted
    too: they are due)."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn, conn.transaction():
        marked = extraction.mark_backfill(conn, namespace)
    pool = make_pool(settings, max_size=2, name="brainstream-backfill")
    producer = make_producer(settings)
    total = ExtractStats()
    try:
        with pool.connection() as conn:
            progress = Progress("entity extraction (rows)",
                                extraction.pending_count(conn) or None)
        names = build_name_embedder(settings)
        stage = ExtractionStage(settings, pool, build_extractor(settings),
                                dead_letters=DeadLetterWriter.of(producer, settings))
        while True:
            stats = stage.run(max_batches=1)
            for name, value in stats.__dict__.items():
                setattr(total, name, getattr(total, name) + value)
            with pool.connection() as conn:
                left = extraction.pending_count(conn)
            progress.update(total.extracted + total.failed + total.rows_skipped)
            if left == 0:
                break
            if not stats.claimed and not stats.recounted:
                time.sleep(0.5)  # the rows left are leased by a worker: it will finish them
        stage.analyze()  # the last stale mark may lie far behind the final size
        progress.finish()
        embedded = embed_names(pool, names, namespace, batch=settings.embed_batch_size)
    finally:
        producer.close()
        pool.close()
    return BackfillReport(marked, total, embedded)
