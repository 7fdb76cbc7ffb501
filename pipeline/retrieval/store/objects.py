"""`ObjectReader` on Postgres: reads of visible objects for the API (hydration, children,
siblings).

An object is visible when it is in the namespace, not soft-deleted, and (for a part) its parent is
visible too. Anything else is simply absent from the answer: another tenant's id and a deleted id
look the same as an unknown one.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from typing import Any

from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from pipeline.domain.read_model import RichObject
from pipeline.postgres.pool import AsyncConn, read_connection

_COLUMNS = sql.SQL(
    "o.id, o.kind, o.title, o.summary, o.properties, o.content_type, o.parent_id, o.position,"
    " o.created_at, o.updated_at")

# Visible rows of the namespace (`o`), parts only with a visible parent (`par`).
_VISIBLE = sql.SQL(
    "objects o LEFT JOIN objects par ON par.id = o.parent_id"
    " WHERE o.namespace_id = %(ns)s AND o.deleted_at IS NULL"
    " AND (o.parent_id IS NULL OR (par.namespace_id = %(ns)s AND par.deleted_at IS NULL))")


def _content(with_content: bool, some: bool = False) -> sql.SQL:
    """The content column: every row's, those in `%(content_of)s` only (`some`), or none."""
    if with_content:
        return sql.SQL("o.content")
    if some:
        return sql.SQL("CASE WHEN o.id = ANY(%(content_of)s::uuid[]) THEN o.content END"
                       " AS content")
    return sql.SQL("NULL::text AS content")


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
                      with_content: bool = False,
                      content_of: Collection[uuid.UUID] = ()) -> dict[uuid.UUID, RichObject]:
        """The visible objects (first-class or parts) among `ids`; content for every one
        (`with_content`) or for those in `content_of` only (a page's objects and the texts of
        its evidence parts in one statement)."""
        if not ids:
            return {}
        query = sql.SQL("SELECT {}, {} FROM {} AND o.id = ANY(%(ids)s::uuid[])").format(
            _COLUMNS, _content(with_content, bool(content_of)), _VISIBLE)
        rows = await self._rows(query, {"ns": namespace, "ids": list(ids),
                                        "content_of": list(content_of)})
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
