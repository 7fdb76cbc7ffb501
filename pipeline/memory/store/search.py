"""`MemorySearcher` on Postgres: the SQL of memory search (migrations/0017_memory.sql): BM25 and
cosine candidates over the messages or summaries of some sessions of one namespace, their rows,
and a turn's neighbours.

Every statement names the namespace and the sessions (the caller resolved them under the namespace),
runs unprepared (planned for its actual scope), and carries the `where` filter as JSONPath
parameters (`pipeline/postgres/conditions.py`), never as text. A session holds thousands of
messages, not millions: cosine is an exact scan of the scope (filtered HNSW starves on a
selective scope, STACK.md), and BM25's statistics are the scope's own.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from pipeline.domain.bm25 import DEFAULT_B, DEFAULT_K1
from pipeline.domain.memory_values import (
    MESSAGE,
    SUMMARY,
    MemoryRow,
    MemoryScope,
    ScopeFacts,
)
from pipeline.domain.read_model import Hit
from pipeline.postgres.conditions import compile_condition
from pipeline.postgres.pool import AsyncConn, read_connection

_TABLE = {MESSAGE: sql.Identifier("messages"), SUMMARY: sql.Identifier("summaries")}
# What BM25 reads: a message's words with its preceding turns' and its date once the embed
# extractor wrote them (migrations/0018; ContextRule), its own until then; a summary's own.
_LEXICAL = {MESSAGE: sql.SQL("coalesce(r.context_lexical, r.lexical)"),
            SUMMARY: sql.SQL("r.lexical")}


# Who said a message (`pipeline/memory/speakers.py: speaker_of`, the same rule in SQL): a name in
# its metadata (`speaker`, else `name`), else its role.
_SPEAKER = ("coalesce(nullif(r.metadata->>'speaker', ''), nullif(r.metadata->>'name', ''),"
            " r.role)")
# At most this many speakers are read per search (a chat has a few; more is not a chat).
_MAX_SPEAKERS = 100


def _scope_sql(kind: str, scope: MemoryScope, params: dict[str, Any]) -> sql.Composable:
    params["sessions"] = list(scope.sessions)
    params["since"] = scope.since
    params["until"] = scope.until
    parts: list[sql.Composable] = [sql.SQL(
        "r.namespace_id = %(ns)s AND r.session_pk = ANY(%(sessions)s::uuid[])"
        " AND r.deleted_at IS NULL"
        " AND (%(since)s::timestamptz IS NULL OR r.created_at >= %(since)s)"
        " AND (%(until)s::timestamptz IS NULL OR r.created_at < %(until)s)")]
    if scope.speakers is not None:
        params["speakers"] = list(scope.speakers)
        parts.append(sql.SQL("false") if kind == SUMMARY else
                     sql.SQL(f"lower({_SPEAKER}) = ANY(%(speakers)s::text[])"))
    if scope.where is not None:
        if kind == SUMMARY:
            parts.append(sql.SQL("false"))
        else:
            parts.append(compile_condition(scope.where, params, sql.SQL("r.metadata")))
    return sql.SQL(" AND ").join(parts)


# BM25 over the scope: N and the mean length from every row of the scope, df and tf from the
# rows holding a query lexeme (OR semantics), k1 and b as the object search's.
_BM25 = """
WITH q AS (SELECT DISTINCT unnest(tsvector_to_array(to_tsvector('english', %(query)s))) AS term),
scope AS (SELECT r.uuid, {lexical} AS lexical FROM {table} r WHERE {scope}),
n AS (SELECT count(*)::float8 AS n, greatest(avg(length(lexical)), 1)::float8 AS avgdl
      FROM scope),
tf AS (SELECT s.uuid, u.lexeme AS term, coalesce(array_length(u.positions, 1), 1)::float8 AS tf,
              length(s.lexical)::float8 AS dl
       FROM scope s CROSS JOIN LATERAL unnest(s.lexical) u
       WHERE s.lexical @@ (SELECT to_tsquery('simple', string_agg(quote_literal(term), ' | '))
                           FROM q)
         AND u.lexeme IN (SELECT term FROM q)),
df AS (SELECT term, count(*)::float8 AS df FROM tf GROUP BY term)
SELECT tf.uuid, sum(ln(1 + (n.n - df.df + 0.5) / (df.df + 0.5))
                    * tf.tf * (%(k1)s + 1)
                    / (tf.tf + %(k1)s * (1 - %(b)s + %(b)s * tf.dl / n.avgdl))) AS score
FROM tf JOIN df USING (term) CROSS JOIN n
GROUP BY tf.uuid ORDER BY score DESC, tf.uuid LIMIT %(k)s
"""

# Exact cosine over the scope: `+ 0` keeps the planner off the HNSW index, whose filtered scans
# return too few rows for a selective scope.
_DENSE = """
SELECT r.uuid, 1 - (r.embedding <=> %(vector)s::vector) AS score FROM {table} r
WHERE {scope} AND r.embedding IS NOT NULL
ORDER BY (r.embedding <=> %(vector)s::vector) + 0, r.uuid LIMIT %(k)s
"""

# Messages sharing the entities of the best hits (`metadata.system.entities[*].norm`, written by
# the entities extractor), each shared entity weighing its inverse frequency in the scope (a name
# on every turn joins nothing).
_SHARING = """
WITH scope AS (SELECT r.uuid, r.metadata FROM messages r WHERE {scope}),
mention AS (SELECT DISTINCT s.uuid, e->>'norm' AS norm
            FROM scope s, jsonb_array_elements(
                CASE WHEN jsonb_typeof(s.metadata->'system'->'entities') = 'array'
                     THEN s.metadata->'system'->'entities' ELSE '[]'::jsonb END) e
            WHERE e->>'norm' = ANY(%(norms)s::text[])),
n AS (SELECT count(*)::float8 AS n FROM scope),
df AS (SELECT norm, count(*)::float8 AS df FROM mention GROUP BY norm)
SELECT m.uuid, sum(ln(n.n / df.df)) AS score
FROM mention m JOIN df USING (norm) CROSS JOIN n
WHERE df.df <= %(max_share)s * n.n AND NOT m.uuid = ANY(%(exclude)s::uuid[])
GROUP BY m.uuid ORDER BY score DESC, m.uuid LIMIT %(k)s
"""

_ROWS = {
    MESSAGE: "SELECT r.uuid, r.session_pk, r.seq, r.role, r.content, r.metadata, r.token_count,"
             " r.created_at, r.embedding FROM messages r WHERE r.namespace_id = %(ns)s"
             " AND r.uuid = ANY(%(ids)s::uuid[]) AND r.deleted_at IS NULL",
    SUMMARY: "SELECT r.uuid, r.session_pk, r.recent_seq, NULL, r.content, '{}'::jsonb,"
             " r.token_count, r.created_at, r.embedding FROM summaries r"
             " WHERE r.namespace_id = %(ns)s AND r.uuid = ANY(%(ids)s::uuid[])"
             " AND r.deleted_at IS NULL",
}


# The connection a searcher's `one_connection` block runs on (per task, so concurrent searches
# through one searcher each have their own).
_PINNED: ContextVar[tuple[PgMemorySearcher, AsyncConn] | None] = ContextVar(
    "brainstream_memory_search_connection", default=None)


class PgMemorySearcher:
    """Candidates, rows and neighbours of memory search over one Postgres database."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn], *, k1: float = DEFAULT_K1,
                 b: float = DEFAULT_B) -> None:
        self.pool = pool
        self.k1 = k1
        self.b = b

    @asynccontextmanager
    async def one_connection(self) -> AsyncIterator[None]:
        """Run this searcher's statements of the block on one pooled connection, one after
        another (a search holds one connection of its key's share, not one per channel)."""
        if self._pinned() is not None:
            yield
            return
        async with read_connection(self.pool) as conn:
            token = _PINNED.set((self, conn))
            try:
                yield
            finally:
                _PINNED.reset(token)

    def _pinned(self) -> AsyncConn | None:
        pinned = _PINNED.get()
        return pinned[1] if pinned is not None and pinned[0] is self else None

    async def _fetch(self, query: sql.Composable | str, params: dict[str, Any]
                     ) -> list[tuple[Any, ...]]:
        async with self.one_connection():
            conn = self._pinned()
            assert conn is not None
            cur = await conn.execute(query, params, prepare=False)  # type: ignore[arg-type]
            rows: list[tuple[Any, ...]] = await cur.fetchall()
        return rows

    async def sessions(self, namespace: uuid.UUID, *, session_id: str | None = None,
                       user_id: str | None = None, limit: int = 1000
                       ) -> dict[uuid.UUID, str]:
        """The live sessions (row id -> session_id) of one session id or of one user."""
        rows = await self._fetch(
            "SELECT id, session_id FROM sessions WHERE namespace_id = %(ns)s"
            " AND deleted_at IS NULL AND (%(sid)s::text IS NULL OR session_id = %(sid)s)"
            " AND (%(uid)s::text IS NULL OR user_id = %(uid)s) ORDER BY session_id LIMIT %(n)s",
            {"ns": namespace, "sid": session_id, "uid": user_id, "n": limit})
        return {row[0]: str(row[1]) for row in rows}

    async def lexical(self, namespace: uuid.UUID, kind: str, scope: MemoryScope, query: str,
                      k: int, *, own_words: bool = False) -> list[Hit]:
        """Top k by BM25 among the scope's rows of `kind`: over the text they are found by, or
        with `own_words` over their own words alone (without the turns before them)."""
        params: dict[str, Any] = {"ns": namespace, "query": query, "k": k, "k1": self.k1,
                                  "b": self.b}
        lexical = sql.SQL("r.lexical") if own_words else _LEXICAL[kind]
        statement = sql.SQL(_BM25).format(table=_TABLE[kind], lexical=lexical,
                                          scope=_scope_sql(kind, scope, params))
        return [Hit(r[0], float(r[1])) for r in await self._fetch(statement, params)]

    async def dense(self, namespace: uuid.UUID, kind: str, scope: MemoryScope,
                    vector: Sequence[float], k: int) -> list[Hit]:
        """Top k by cosine among the scope's embedded rows of `kind`."""
        params: dict[str, Any] = {"ns": namespace, "vector": list(vector), "k": k}
        statement = sql.SQL(_DENSE).format(table=_TABLE[kind],
                                           scope=_scope_sql(kind, scope, params))
        return [Hit(r[0], float(r[1])) for r in await self._fetch(statement, params)]

    async def facts(self, namespace: uuid.UUID, sessions: Sequence[uuid.UUID]) -> ScopeFacts:
        """The speakers (lower case, at most `_MAX_SPEAKERS`) and last message time of the
        visible messages of `sessions`."""
        rows = await self._fetch(
            f"SELECT (SELECT array_agg(s) FROM (SELECT DISTINCT lower({_SPEAKER}) AS s"
            "  FROM messages r WHERE r.namespace_id = %(ns)s"
            "  AND r.session_pk = ANY(%(sessions)s::uuid[]) AND r.deleted_at IS NULL"
            "  LIMIT %(n)s) x),"
            " (SELECT max(r.created_at) FROM messages r WHERE r.namespace_id = %(ns)s"
            "  AND r.session_pk = ANY(%(sessions)s::uuid[]) AND r.deleted_at IS NULL)",
            {"ns": namespace, "sessions": list(sessions), "n": _MAX_SPEAKERS})
        speakers, last = rows[0]
        return ScopeFacts(frozenset(speakers or ()), last)

    async def sharing_entities(self, namespace: uuid.UUID, scope: MemoryScope,
                               norms: Sequence[str], exclude: Sequence[uuid.UUID], k: int, *,
                               max_share: float) -> list[Hit]:
        """Top k messages of the scope (not `exclude`) by the summed inverse frequency of the
        entities (`norms`) they mention; an entity on more than `max_share` of the scope's
        messages counts for nothing."""
        if not norms:
            return []
        params: dict[str, Any] = {"ns": namespace, "norms": list(norms),
                                  "exclude": list(exclude), "k": k, "max_share": max_share}
        statement = sql.SQL(_SHARING).format(scope=_scope_sql(MESSAGE, scope, params))
        return [Hit(r[0], float(r[1])) for r in await self._fetch(statement, params)]

    async def rows(self, namespace: uuid.UUID, kind: str, ids: Sequence[uuid.UUID]
                   ) -> dict[uuid.UUID, MemoryRow]:
        """The visible rows of `ids` (gone ones are absent)."""
        if not ids:
            return {}
        rows = await self._fetch(_ROWS[kind], {"ns": namespace, "ids": list(ids)})
        return {r[0]: MemoryRow(kind, r[0], r[1], int(r[2]), r[3], r[4], r[5] or {}, r[6],
                                r[7], r[8]) for r in rows}

    async def neighbours(self, namespace: uuid.UUID, session_pk: uuid.UUID, seq: int,
                         radius: int) -> list[MemoryRow]:
        """The visible messages within `radius` seqs of `seq` (itself excluded), in order."""
        rows = await self._fetch(
            "SELECT r.uuid, r.session_pk, r.seq, r.role, r.content, r.metadata, r.token_count,"
            " r.created_at FROM messages r WHERE r.namespace_id = %(ns)s"
            " AND r.session_pk = %(pk)s AND r.seq BETWEEN %(lo)s AND %(hi)s AND r.seq <> %(seq)s"
            " AND r.deleted_at IS NULL ORDER BY r.seq",
            {"ns": namespace, "pk": session_pk, "lo": seq - radius, "hi": seq + radius,
             "seq": seq})
        return [MemoryRow(MESSAGE, r[0], r[1], int(r[2]), r[3], r[4], r[5] or {}, r[6], r[7],
                          None) for r in rows]
