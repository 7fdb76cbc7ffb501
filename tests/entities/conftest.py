"""Fixtures of the extraction stage tests: a database of their own (migrated, with the example
kind catalog), so the session's pipeline processes, if running, never extract these rows with
another extractor while a test runs the stage itself."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg_pool import ConnectionPool

from pipeline.domain.kinds import load_catalog
from pipeline.domain.settings import Settings
from pipeline.ops.migrations import apply_migrations
from pipeline.stores.postgres.kinds import apply_catalog
from pipeline.stores.postgres.pool import make_pool
from tests.stackutil import EXAMPLES, make_settings


@pytest.fixture(scope="module")
def edb(stack_settings: Settings) -> Settings:
    """Settings of a fresh migrated database with the example catalog (company, note...)."""
    name = f"entities_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(stack_settings.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = stack_settings.effective_postgres_dsn.rsplit("/", 1)[0] + f"/{name}"
    settings = make_settings(postgres_dsn=dsn)
    apply_migrations(settings)
    with psycopg.connect(dsn) as conn:
        apply_catalog(conn, load_catalog((EXAMPLES / "kinds.yaml").read_text()))
    return settings


@pytest.fixture(scope="module")
def epool(edb: Settings) -> Iterator[ConnectionPool]:
    pool = make_pool(edb, max_size=4)
    yield pool
    pool.close()
