"""`brainstream migrate` on the real services: idempotent, safe when run concurrently."""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid

import psycopg
import pytest
from psycopg import sql

from pipeline.domain.errors import MigrationError
from pipeline.graph.falkordb.schema import connect, index_rows, prepare_graph
from pipeline.kafka.topics import ensure_topics, partition_counts, topic_names
from pipeline.ops.migrations import applied_versions, apply_migrations, discover
from pipeline.settings import Settings
from tests.stackutil import make_settings, settings_env

pytestmark = pytest.mark.stack


@pytest.fixture()
def fresh_db(stack_settings: Settings) -> Settings:
    """Settings pointing at a new, empty database on the test server."""
    name = f"mig_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(stack_settings.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = stack_settings.effective_postgres_dsn.rsplit("/", 1)[0] + f"/{name}"
    return make_settings(postgres_dsn=dsn)


def _tables(settings: Settings) -> set[str]:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return {str(row[0]) for row in rows.fetchall()}


def test_migrate_twice(fresh_db: Settings) -> None:
    first = apply_migrations(fresh_db)
    assert first == [m.version for m in discover()]
    assert apply_migrations(fresh_db) == []
    assert applied_versions(fresh_db) == first
    assert {"objects", "object_kinds", "links", "outbox", "processed_events",
            "schema_migrations"} <= _tables(fresh_db)
    with psycopg.connect(fresh_db.effective_postgres_dsn) as conn:
        exts = {r[0] for r in conn.execute("SELECT extname FROM pg_extension").fetchall()}
        indexes = {r[0] for r in conn.execute(
            "SELECT indexname FROM pg_indexes"
            " WHERE tablename IN ('objects', 'object_embeddings')").fetchall()}
        dim = conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'object_embeddings'::regclass"
            " AND attname = 'embedding'").fetchone()
    assert {"vector", "pg_trgm"} <= exts
    assert {"objects_lexical", "objects_title_trgm", "objects_properties",
            "object_embeddings_hnsw"} <= indexes
    assert dim is not None and dim[0] == fresh_db.vector_dim


def test_migrate_concurrently(fresh_db: Settings) -> None:
    results: list[list[int]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(apply_migrations(fresh_db))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    # exactly one runner applied everything; the others found nothing to do
    assert sorted(len(r) for r in results) == [0, 0, 0, len(discover())]
    assert applied_versions(fresh_db) == [m.version for m in discover()]


def test_dimension_change_is_refused(fresh_db: Settings) -> None:
    apply_migrations(fresh_db)
    other = make_settings(postgres_dsn=fresh_db.postgres_dsn, embedder="minilm")
    with pytest.raises(MigrationError) as err:
        apply_migrations(other)
    assert err.value.field == "embedding_dim"


def test_graph_and_topics_are_prepared_idempotently(stack_settings: Settings) -> None:
    lines: list[str] = []
    prepare_graph(stack_settings, report=lines.append)
    assert "nothing to do" in lines[-1]
    graph = connect(stack_settings).select_graph(stack_settings.graph_name)
    rows = index_rows(graph)
    kinds = {(r["label"], p, t) for r in rows for p, ts in r["types"].items() for t in ts}
    assert {("Entity", "id", "RANGE"), ("Entity", "index_text", "FULLTEXT"),
            ("Entity", "embedding", "VECTOR")} <= kinds
    assert all(r["status"] == "OPERATIONAL" for r in rows)
    counts = ensure_topics(stack_settings)
    assert counts == {stack_settings.topic_events: stack_settings.topic_partitions,
                      stack_settings.topic_dlq: stack_settings.topic_partitions,
                      stack_settings.topic_changes: stack_settings.topic_changes_partitions}
    assert partition_counts(stack_settings, topic_names(stack_settings)) == counts


def test_cli_migrate_and_status(stack_settings: Settings) -> None:
    env = settings_env(stack_settings)
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "migrate"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "0 migration(s) applied" in done.stdout
    status = subprocess.run([sys.executable, "-m", "pipeline.cli", "services", "status"],
                            env=env, capture_output=True, text=True, timeout=60, check=False)
    assert status.returncode == 0, status.stdout + status.stderr
    for name in ("postgres", "broker", "falkordb", "redis"):
        assert any(line.startswith(name) and "healthy" in line
                   for line in status.stdout.splitlines()), status.stdout
