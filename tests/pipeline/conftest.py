"""The pipeline's processes (consumer, embedding worker, relay) running against the test stack."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pipeline.domain.settings import Settings
from pipeline.ops.migrations import apply_migrations
from tests.pipelineutil import Proc, Publisher, pipeline_env, put, wait_for
from tests.stackutil import EXAMPLES, make_settings

__all__ = ["EXAMPLES", "indexed"]


@pytest.fixture(scope="session")
def procs(catalog: Settings) -> Iterator[dict[str, Proc]]:
    """consumer + worker + relay, ready (a probe put went all the way into the graph)."""
    settings = catalog
    env = pipeline_env(settings)
    log_dir = settings.resolved_data_dir / "proc-logs"
    running = {name: Proc(name, env, log_dir).start() for name in ("consumer", "worker", "relay")}
    try:
        probe = put(uuid.uuid4(), title="readiness probe")
        pub = Publisher(settings)
        pub.send(probe, probe["data"]["id"])
        pub.close()
        wait_for(lambda: indexed(settings, probe["data"]["id"]), timeout=120,
                 what="the pipeline to index a probe object")
        yield running
    finally:
        for proc in running.values():
            proc.stop()


@pytest.fixture()
def publisher(stack_settings: Settings) -> Iterator[Publisher]:
    pub = Publisher(stack_settings)
    yield pub
    pub.close()


def indexed(settings: Settings, object_id: str) -> bool:
    """True once the object is embedded (with its parts) and its node is in the graph."""
    import falkordb

    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute(
            "SELECT bool_and(embed_status = 'done') FROM objects"
            " WHERE (id = %s OR parent_id = %s) AND deleted_at IS NULL",
            (object_id, object_id)).fetchone()
    if not row or not row[0]:
        return False
    graph = falkordb.FalkorDB.from_url(settings.effective_falkordb_url).select_graph(
        settings.graph_name)
    found = graph.query("MATCH (n:Entity {id: $id}) WHERE n.embedding IS NOT NULL RETURN count(n)",
                        {"id": object_id}).result_set
    return bool(found and found[0][0] == 1)


@pytest.fixture()
def db(stack_settings: Settings) -> Iterator[psycopg.Connection[Any]]:
    """A fresh, migrated database with an empty (open) kind catalog."""
    name = f"apply_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(stack_settings.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = stack_settings.effective_postgres_dsn.rsplit("/", 1)[0] + f"/{name}"
    apply_migrations(make_settings(postgres_dsn=dsn))
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn
