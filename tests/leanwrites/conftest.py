"""Fixtures of the lean-writes tests: a fresh migrated database per test, the write path applied
in-process (`apply_batch`) and the embedding service run in-process on it, so each test decides
when rows are embedded (the live pipeline's processes serve the stack's own database, not these)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from pgvector.psycopg import register_vector

from pipeline.embedding.embedders import build_embedder
from pipeline.embedding.service import EmbeddingService
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import IngestOptions, RawRecord
from pipeline.ingest.store.events import PgEventStore
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.pipelineutil import put
from tests.stackutil import fresh_database

OPTIONS = IngestOptions(chunk_max_tokens=20, chunk_overlap_tokens=0)


@pytest.fixture()
def lean(stack_settings: Settings) -> Settings:
    """Settings on a fresh, migrated database with an open kind catalog."""
    return fresh_database(stack_settings, "lean")


@pytest.fixture()
def db(lean: Settings) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(lean.effective_postgres_dsn, autocommit=True) as conn:
        register_vector(conn)
        yield conn


@pytest.fixture()
def embedding(lean: Settings) -> Iterator[EmbeddingService]:
    """The embedding worker's service on `lean` (no dead-letter topic: nothing fails here)."""
    pool = make_pool(lean, max_size=2, name="leanwrites-test")
    try:
        yield EmbeddingService(lean, pool, build_embedder(lean))
    finally:
        pool.close()


def apply(conn: psycopg.Connection[Any], *events: dict[str, Any]) -> Any:
    """Apply `events` as one consumer batch (one transaction)."""
    records = [RawRecord("t", 0, i, None, json.dumps(e).encode()) for i, e in enumerate(events)]
    with conn.transaction():
        return apply_batch(PgEventStore(conn), records, OPTIONS)


def many_rows(conn: psycopg.Connection[Any], namespace: uuid.UUID, count: int = 2000) -> None:
    """A put through the write path, then `count` more rows as a bulk load writes them (the
    triggers make each pending for embedding and extraction): claims then take full batches
    from full tables."""
    apply(conn, put(namespace, kind="doc", title="written by the write path", content="text"))
    conn.execute("INSERT INTO objects (id, namespace_id, kind, title, index_text_hash)"
                 " SELECT gen_random_uuid(), %s, 'doc', 'row ' || i, md5(i::text)"
                 " FROM generate_series(1, %s) AS i", (namespace, count))
