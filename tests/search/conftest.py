"""Fixtures for the read side on the real Postgres: one fresh, migrated database per test module,
an event loop that lives as long as the module, and an async pool opened in it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg_pool import AsyncConnectionPool

from pipeline.postgres.pool import make_async_pool
from pipeline.retrieval.store.objects import PgObjectReader
from pipeline.retrieval.store.search import PgPartSearcher
from pipeline.settings import Settings
from tests.search.corpus import build_corpus
from tests.stackutil import fresh_database, make_settings


@pytest.fixture(scope="module")
def search_dsn(stack_settings: Settings) -> str:
    """A fresh, migrated database (open kind catalog) for this module only, keeping the SQL
    BM25 postings and vocabulary that these tests search (LEXICAL_ENGINE=postgres)."""
    return fresh_database(stack_settings, "search",
                          lexical_engine="postgres").effective_postgres_dsn


@pytest.fixture(scope="module")
def db(search_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A synchronous autocommit connection for writing fixtures and computing references."""
    with psycopg.connect(search_dsn, autocommit=True) as conn:
        register_vector(conn)
        yield conn


@pytest.fixture(scope="module")
def aio() -> Iterator[asyncio.Runner]:
    """One event loop per module: the async pool is bound to the loop that opened it."""
    with asyncio.Runner() as runner:
        yield runner


@pytest.fixture(scope="module")
def pool(aio: asyncio.Runner, search_dsn: str) -> Iterator[AsyncConnectionPool[Any]]:
    opened = aio.run(make_async_pool(make_settings(postgres_dsn=search_dsn), max_size=4))
    yield opened
    aio.run(opened.close())


@pytest.fixture(scope="module")
def searcher(pool: AsyncConnectionPool[Any]) -> PgPartSearcher:
    # no statistics cache: tests change rows between searches and compare with fresh references
    return PgPartSearcher(pool, stats_ttl=0)


@pytest.fixture(scope="module")
def reader(pool: AsyncConnectionPool[Any]) -> PgObjectReader:
    return PgObjectReader(pool)


@pytest.fixture(scope="module")
def corpus(db: psycopg.Connection[Any]) -> dict[str, Any]:
    """The shared corpus (tests/search/corpus.py) in this module's database."""
    return build_corpus(db)
