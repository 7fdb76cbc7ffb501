"""Reads of visible objects for the API (hydration, children, siblings), and the async pool.

An object is visible when it is in the namespace, not soft-deleted, and (for a part) its parent is
visible too. Anything else is simply absent from the answer: another tenant's id and a deleted id
look the same as an unknown one.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from pipeline.domain.errors import Unavailable
from pipeline.domain.read_model import RichObject
from pipeline.domain.settings import Settings

AsyncConn = psycopg.AsyncConnection[Any]

# Searches are planned for their actual parameters: psycopg prepares a statement after 5
# executions and Postgres may then switch to a generic plan that ignores how selective a
# namespace or filter is.
SESSION_OPTIONS = "-c plan_cache_mode=force_custom_plan"


async def _configure(conn: AsyncConn) -> None:
    await register_vector_async(conn)
    await conn.set_autocommit(True)  # explicit transactions only


async def make_async_pool(settings: Settings, *, min_size: int = 1, max_size: int = 8,
                          name: str = "brainstream-read", wait_seconds: float = 5.0,
                          ) -> AsyncConnectionPool[AsyncConn]:
    """An opened async pool for the read side: pgvector registered, autocommit, and
    `plan_cache_mode = force_custom_plan` on every session.

    Built to ride out a Postgres restart without restarting the API: every connection is
    checked as it leaves the pool (a connection the restart broke is replaced, not handed to a
    request), and a request waits at most `wait_seconds` for one, so while Postgres is down
    requests fail fast with `Unavailable` (503) instead of hanging for psycopg's default 30 s.
    """
    pool: AsyncConnectionPool[AsyncConn] = AsyncConnectionPool(
        settings.effective_postgres_dsn, min_size=min_size, max_size=max_size,
        configure=_configure, name=name, open=False, timeout=wait_seconds,
        check=AsyncConnectionPool.check_connection,
        kwargs={"application_name": name, "options": SESSION_OPTIONS, "connect_timeout": 5})
    await pool.open(wait=True, timeout=30)
    return pool


@asynccontextmanager
async def read_connection(pool: AsyncConnectionPool[AsyncConn]) -> AsyncIterator[AsyncConn]:
    """A pooled connection; an unreachable database becomes `Unavailable`."""
    try:
        async with pool.connection() as conn:
            yield conn
    except (psycopg.OperationalError, PoolTimeout) as exc:
        raise Unavailable(f"postgres: {exc}") from exc


_COLUMNS = sql.SQL(
    "o.id, o.kind, o.title, o.summary, o.properties, o.content_type, o.parent_id, o.position,"
    " o.created_at, o.updated_at")

# Visible rows of the namespace (`o`), parts only with a visible parent (`par`).
_VISIBLE = sql.SQL(
    "objects o LEFT JOIN objects par ON par.id = o.parent_id"
    " WHERE o.namespace_id = %(ns)s AND o.deleted_at IS NULL"
    " AND (o.parent_id IS NULL OR (par.namespace_id = %(ns)s AND par.deleted_at IS NULL))")


def _content(with_content: bool) -> sql.SQL:
    return sql.SQL("o.content") if with_content else sql.SQL("NULL::text AS content")


def _rich(row: dict[str, Any]) -> RichObject:
    return RichObject(
        id=row["id"], kind=row["kind"], title=row["title"], summary=row["summary"], score=0.0,
        properties=dict(row["properties"] or {}), content_type=row["content_type"],
        parent_id=row["parent_id"], position=row["position"], created_at=row["created_at"],
        updated_at=row["updated_at"], content=row["content"])


class PgObjectReader:
    """`ObjectReader` on Postgres: visible first-class objects and parts of one namespace."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn]) -> None:
        self.pool = pool

    async def _rows(self, query: sql.SQL | sql.Composed,
                    params: dict[str, Any]) -> list[dict[str, Any]]:
        async with read_connection(self.pool) as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(query, params, prepare=False)
            return await cur.fetchall()

    async def hydrate(self, namespace: uuid.UUID, ids: Sequence[uuid.UUID], *,
                      with_content: bool = False) -> dict[uuid.UUID, RichObject]:
        """The visible objects (first-class or parts) among `ids`; content only on request."""
        if not ids:
            return {}
        query = sql.SQL("SELECT {}, {} FROM {} AND o.id = ANY(%(ids)s::uuid[])").format(
            _COLUMNS, _content(with_content), _VISIBLE)
        rows = await self._rows(query, {"ns": namespace, "ids": list(ids)})
        return {row["id"]: _rich(row) for row in rows}

    async def children(self, namespace: uuid.UUID, parent_id: uuid.UUID, *, offset: int = 0,
                       limit: int = 100, with_content: bool = True) -> list[RichObject]:
        """Visible parts of a visible parent, by position (with content: this is a read)."""
        if limit <= 0:
            return []
        query = sql.SQL(
            "SELECT {}, {} FROM {} AND o.parent_id = %(parent)s"
            " ORDER BY o.position NULLS LAST, o.id OFFSET %(offset)s LIMIT %(limit)s").format(
            _COLUMNS, _content(with_content), _VISIBLE)
        rows = await self._rows(query, {"ns": namespace, "parent": parent_id,
                                        "offset": max(offset, 0), "limit": limit})
        return [_rich(row) for row in rows]

    async def siblings(self, namespace: uuid.UUID, part_id: uuid.UUID, *, radius: int,
                       with_content: bool = True) -> list[RichObject]:
        """The visible parts within `radius` positions of a visible part (itself excluded), by
        position; nothing for a first-class object or a part without a position."""
        if radius <= 0:
            return []
        query = sql.SQL(
            "WITH me AS (SELECT o.parent_id, o.position FROM {} AND o.id = %(part)s"
            " AND o.parent_id IS NOT NULL)"
            " SELECT {}, {} FROM {} AND o.parent_id = (SELECT parent_id FROM me)"
            " AND o.id <> %(part)s"
            " AND o.position BETWEEN (SELECT position FROM me) - %(radius)s"
            " AND (SELECT position FROM me) + %(radius)s"
            " ORDER BY o.position, o.id").format(
            _VISIBLE, _COLUMNS, _content(with_content), _VISIBLE)
        rows = await self._rows(query, {"ns": namespace, "part": part_id, "radius": radius})
        return [_rich(row) for row in rows]
