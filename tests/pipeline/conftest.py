"""Fixtures of the write-path tests: a fresh migrated database per test (the pipeline's processes
are in the root conftest, shared with tests/hostile)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from pipeline.settings import Settings
from tests.pipelineutil import indexed
from tests.stackutil import EXAMPLES, fresh_database

__all__ = ["EXAMPLES", "indexed"]  # re-exported for the tests that import them here


@pytest.fixture()
def db(stack_settings: Settings) -> Iterator[psycopg.Connection[Any]]:
    """A fresh, migrated database with an empty (open) kind catalog."""
    dsn = fresh_database(stack_settings, "apply").effective_postgres_dsn
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn
