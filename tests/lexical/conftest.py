"""Fixtures for the lexical index on the real Postgres: the shared search corpus in a fresh
database of this module, its Tantivy indexes in a data directory of their own, built by the real
writer, and a searcher over them whose query analysis is Postgres's."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from pipeline.lexical.searcher import TantivySearcher
from pipeline.lexical.writer import LexicalWriter
from pipeline.ops.migrations import apply_migrations
from pipeline.postgres.pool import make_async_pool, make_pool
from pipeline.retrieval.store.search import PgPartSearcher
from pipeline.settings import Settings
from tests.search.corpus import build_corpus
from tests.stackutil import make_settings


@pytest.fixture(scope="module")
def lex_settings(stack_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Settings of a fresh, migrated database (open kind catalog) and a fresh data directory;
    the database keeps the SQL BM25 postings too (migrated as LEXICAL_ENGINE=postgres would),
    since the parity tests compare the Tantivy index with the SQL channel."""
    name = f"lexical_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(stack_settings.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = stack_settings.effective_postgres_dsn.rsplit("/", 1)[0] + f"/{name}"
    data_dir: Path = tmp_path_factory.mktemp("lexical-data")
    settings = make_settings(postgres_dsn=dsn, data_dir=data_dir)
    apply_migrations(settings.model_copy(update={"lexical_engine": "postgres"}))
    return settings


@pytest.fixture(scope="module")
def db(lex_settings: Settings) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(lex_settings.effective_postgres_dsn, autocommit=True) as conn:
        register_vector(conn)
        yield conn


@pytest.fixture(scope="module")
def sync_pool(lex_settings: Settings) -> Iterator[ConnectionPool]:
    pool = make_pool(lex_settings, max_size=2, name="lexical-test")
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def writer(lex_settings: Settings, sync_pool: ConnectionPool) -> LexicalWriter:
    return LexicalWriter(lex_settings, sync_pool)


@pytest.fixture(scope="module")
def aio() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as runner:
        yield runner


@pytest.fixture(scope="module")
def pool(aio: asyncio.Runner, lex_settings: Settings) -> Iterator[AsyncConnectionPool[Any]]:
    opened = aio.run(make_async_pool(lex_settings, max_size=4))
    yield opened
    aio.run(opened.close())


@pytest.fixture(scope="module")
def pg_searcher(pool: AsyncConnectionPool[Any]) -> PgPartSearcher:
    return PgPartSearcher(pool, stats_ttl=0)


@pytest.fixture(scope="module")
def tv(lex_settings: Settings, pg_searcher: PgPartSearcher) -> TantivySearcher:
    return TantivySearcher(lex_settings.resolved_data_dir, lex_settings.generation,
                           pg_searcher.query_lexemes)


@pytest.fixture(scope="module")
def corpus(db: psycopg.Connection[Any], writer: LexicalWriter) -> dict[str, Any]:
    """The shared search corpus (tests/search/corpus.py), indexed by the writer."""
    built = build_corpus(db)
    stats = writer.run()
    assert (stats.rows or stats.built) and not stats.skipped
    return built
