"""Fixtures of the write-path tests: a fresh migrated database per test (the pipeline's processes
are in the root conftest, shared with tests/hostile)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pipeline.domain.settings import Settings
from pipeline.ops.migrations import apply_migrations
from tests.pipelineutil import indexed
from tests.stackutil import EXAMPLES, make_settings

__all__ = ["EXAMPLES", "indexed"]  # re-exported for the tests that import them here


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
