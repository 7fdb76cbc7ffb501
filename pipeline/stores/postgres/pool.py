"""Connection pools for Postgres with the pgvector type registered on every connection."""

from __future__ import annotations

from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from pipeline.domain.settings import Settings


def _configure(conn: psycopg.Connection[Any]) -> None:
    register_vector(conn)
    conn.autocommit = True  # explicit transactions only (`with conn.transaction()`)


def make_pool(settings: Settings, *, min_size: int = 1, max_size: int = 4,
              name: str = "brainstream") -> ConnectionPool:
    """An opened pool; statements outside `conn.transaction()` autocommit."""
    pool = ConnectionPool(settings.effective_postgres_dsn, min_size=min_size, max_size=max_size,
                          configure=_configure, name=name, open=False,
                          kwargs={"application_name": name})
    pool.open(wait=True, timeout=30)
    return pool
