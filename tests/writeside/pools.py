"""A small pool on the test database of tests/pipeline/conftest.py (`db`), for the write-side tests
that run the resolver's proposal pass by hand."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from pipeline.postgres.pool import make_pool
from tests.stackutil import make_settings


@pytest.fixture()
def pool(db: psycopg.Connection[Any]) -> Iterator[ConnectionPool]:
    pool = make_pool(make_settings(postgres_dsn=db.info.dsn), max_size=2)
    yield pool
    pool.close()
