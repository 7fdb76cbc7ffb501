"""What "more like this" searches with, read from Postgres: an object's own vector and its
lexemes with their frequencies (`PgLikenessSource`).

The target is a visible object or a visible part of a visible object, of the caller's namespace;
anything else is NotFound, so an id of another tenant reads exactly like an id that does not
exist. The vector is the target's own stored vector (an object's own row embeds its title, summary,
properties and first 2,000 characters), or, while that row has none, the mean of its visible
parts' vectors, normalised. On SciFact with MiniLM the own row ranked documents relevant to the
same claim best (recall@10 0.817, MRR 0.588; the mean of the row and its parts 0.815 / 0.556,
the parts' mean 0.801 / 0.558, each part searched 0.807 / 0.543; a copy with a fifth of its
sentences dropped came first for all four). The lexemes are those of the rows searched for it
(an object: its visible parts, or itself when it has none).
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from pipeline.domain.errors import NotFound
from pipeline.domain.read_model import Likeness
from pipeline.postgres.pool import AsyncConn, read_connection

_TARGET = sql.SQL(
    "SELECT o.id, o.parent_id FROM objects o LEFT JOIN objects p ON p.id = o.parent_id"
    " WHERE o.id = %(id)s AND o.namespace_id = %(ns)s AND o.deleted_at IS NULL"
    " AND (o.parent_id IS NULL OR (p.namespace_id = %(ns)s AND p.deleted_at IS NULL))")

# Every row of the object (its own and its parts', visible or not): none is an answer
_ROWS = sql.SQL(
    "SELECT id, parent_id IS NOT NULL AND deleted_at IS NULL FROM objects"
    " WHERE namespace_id = %(ns)s AND (id = %(root)s OR parent_id = %(root)s)")

_VECTOR = sql.SQL(
    "SELECT avg(e.embedding) FROM object_embeddings e"
    " WHERE e.id = ANY(%(ids)s::uuid[]) AND e.namespace_id = %(ns)s"
    " AND e.embedding IS NOT NULL")

# A row's lexemes count once per position (as the postings' tf); one without positions once
_TERMS = sql.SQL(
    "SELECT l.lexeme, sum(coalesce(array_length(l.positions, 1), 1))::int"
    " FROM objects o, unnest(o.lexical) AS l"
    " WHERE o.id = ANY(%(ids)s::uuid[]) AND o.namespace_id = %(ns)s GROUP BY l.lexeme")


class PgLikenessSource:
    """`LikenessSource` over one Postgres database."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn]) -> None:
        self.pool = pool

    async def likeness(self, namespace: uuid.UUID, target: uuid.UUID) -> Likeness:
        """The target's vector and lexemes, and the rows never to answer (its object's);
        NotFound(field="similar_to") when it is not visible in `namespace`."""
        async with read_connection(self.pool) as conn:
            found = await self._one(conn, _TARGET, {"id": target, "ns": namespace})
            if found is None:
                raise NotFound(f"object {target} not found", field="similar_to")
            root = found[1] or found[0]
            cur = await conn.execute(_ROWS, {"ns": namespace, "root": root}, prepare=False)
            rows = await cur.fetchall()
            parts = [r[0] for r in rows if r[1]]
            term_ids = [target] if found[1] is not None else parts or [root]
            mean = await self._one(conn, _VECTOR, {"ids": [target], "ns": namespace})
            if (mean is None or mean[0] is None) and found[1] is None and parts:
                mean = await self._one(conn, _VECTOR, {"ids": parts, "ns": namespace})
            cur = await conn.execute(_TERMS, {"ids": term_ids, "ns": namespace}, prepare=False)
            terms = {str(lexeme): int(tf) for lexeme, tf in await cur.fetchall()}
        vector = None
        if mean is not None and mean[0] is not None:
            values = np.asarray(mean[0].to_numpy() if hasattr(mean[0], "to_numpy") else mean[0],
                                dtype=np.float32)
            norm = float(np.linalg.norm(values))
            vector = tuple(float(v) for v in values / norm) if norm > 0 else None
        return Likeness(vector=vector, terms=terms,
                        exclude=frozenset(r[0] for r in rows) | {root})

    @staticmethod
    async def _one(conn: AsyncConn, statement: sql.SQL,
                   params: dict[str, Any]) -> tuple[Any, ...] | None:
        cur = await conn.execute(statement, params, prepare=False)
        row: tuple[Any, ...] | None = await cur.fetchone()
        return row
