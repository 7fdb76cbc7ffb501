"""`MatchSetReader` on Postgres: a search's facet counts and sorted order over its match set.

The match set (`pipeline/domain/match_set.py`) is built here in SQL for both lexical engines:
the query's lexemes OR'ed as a tsquery against `objects.lexical` (GIN index `objects_lexical`;
the very lexemes the postings and the Tantivy documents hold), each matching row promoted to
its object (filters and scope judge that object, as in every channel), united with the fused
candidates the engine passes. Counting and ordering objects in SQL keeps the counts exact (an
object counts once however many of its parts match) and typed (numbers as numbers, datetimes as
instants: `brainstream_instant`, migration 0047). Every statement names the namespace.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from pipeline.domain.match_set import FacetCounts, FacetPlan, SortPlan
from pipeline.domain.read_model import Filters
from pipeline.postgres.pool import AsyncConn, read_connection
from pipeline.retrieval.store.filters import Query, filter_conditions
from pipeline.retrieval.store.search_sql import QUERY_LEXEMES


class IndexFacets(Protocol):
    """Facets and sorted orders a lexical index can make (`pipeline/lexical/facets.py`);
    None where the SQL store must count or sort."""

    async def facets(self, namespace: uuid.UUID, query: str, filters: Filters,
                     scope_ids: Sequence[uuid.UUID], candidates: Sequence[uuid.UUID],
                     plans: Sequence[FacetPlan]) -> list[FacetCounts | None]: ...

    async def sorted_ids(self, namespace: uuid.UUID, query: str, filters: Filters,
                         scope_ids: Sequence[uuid.UUID], ranked: Sequence[uuid.UUID],
                         plan: SortPlan, limit: int) -> list[uuid.UUID] | None: ...

# The match set's objects: the promoted ids of the rows holding a query word (in scope), and
# the fused candidates; each object read once by its key, held to the namespace and filtered.
_MATCH = sql.SQL(
    "hit AS (SELECT DISTINCT coalesce(o.parent_id, o.id) AS id FROM objects o"
    " WHERE o.lexical @@ %(tsq)s::tsquery AND o.namespace_id = %(ns)s"
    " AND o.deleted_at IS NULL AND {scope}"
    " UNION SELECT unnest(%(candidates)s::uuid[])),"
    " m AS MATERIALIZED (SELECT p.id, p.kind, p.title, p.position, p.properties,"
    " p.created_at, p.updated_at FROM hit JOIN objects p ON p.id = hit.id"
    " WHERE p.namespace_id = %(ns)s AND p.deleted_at IS NULL AND {where})")
# Rows holding a query word are found by the GIN index `objects_lexical`: a natural-language
# query matches a fifth of the rows or more, where the planner would rather scan the table and
# test each row's tsvector, detoasting every one of them (70 ms at 10k rows, against 4 ms).
_USE_INDEXES = sql.SQL("SET LOCAL enable_seqscan = off")

# A property's values as rows (a list gives one row per element; a missing key none).
_ELEMENTS = sql.SQL(
    "jsonb_array_elements(CASE jsonb_typeof(p.properties -> {key}) WHEN 'array'"
    " THEN p.properties -> {key} ELSE jsonb_build_array(p.properties -> {key}) END) AS e(v)")


def tsquery_text(lexemes: Sequence[str]) -> str | None:
    """The lexemes OR'ed as tsquery input (each quoted: a lexeme is taken as it is, never
    parsed as an operator); None for none."""
    quoted = ["'" + lex.replace("\\", "\\\\").replace("'", "''") + "'" for lex in lexemes]
    return " | ".join(quoted) or None


def _facet_select(i: int, plan: FacetPlan) -> tuple[Query, dict[str, Any]]:
    """One facet's (i, value as jsonb, object count) rows over `m` (the match set's objects)."""
    params: dict[str, Any] = {}
    index = sql.Literal(i)
    if plan.source == "kind":
        return sql.SQL("SELECT {i} AS i, to_jsonb(p.kind) AS v, count(*) AS n"
                       " FROM m p GROUP BY 2").format(i=index), params
    if plan.source in ("created_at", "updated_at"):
        params[f"unit_{i}"] = plan.unit
        return sql.SQL(
            "SELECT {i} AS i, to_jsonb(date_trunc({unit}, p.{col} AT TIME ZONE 'UTC')) AS v,"
            " count(*) AS n FROM m p GROUP BY 2").format(
                i=index, unit=sql.SQL("{}::text").format(sql.Placeholder(f"unit_{i}")),
                col=sql.Identifier(plan.source)), params
    key = sql.SQL("{}::text").format(sql.Placeholder(f"key_{i}"))
    params[f"key_{i}"] = plan.name
    elements = _ELEMENTS.format(key=key)
    if plan.type == "terms":
        value: Query = sql.SQL("e.v")
        keep: Query = sql.SQL("jsonb_typeof(e.v) IN ('string', 'number', 'boolean')")
    elif plan.type == "number":
        params[f"width_{i}"] = plan.width
        width = sql.Placeholder(f"width_{i}")
        value = sql.SQL("to_jsonb(floor(e.v::numeric / {w}::numeric) * {w}::numeric)").format(
            w=width)
        keep = sql.SQL("jsonb_typeof(e.v) = 'number'")
    else:
        params[f"unit_{i}"] = plan.unit
        unit = sql.SQL("{}::text").format(sql.Placeholder(f"unit_{i}"))
        value = sql.SQL("to_jsonb(date_trunc({unit}, brainstream_instant(e.v #>> '{{}}')"
                        " AT TIME ZONE 'UTC'))").format(unit=unit)
        keep = sql.SQL("jsonb_typeof(e.v) = 'string'"
                       " AND brainstream_instant(e.v #>> '{}') IS NOT NULL")
    return sql.SQL(
        "SELECT {i} AS i, {value} AS v, count(DISTINCT p.id) AS n"
        " FROM m p CROSS JOIN LATERAL {elements} WHERE {keep} GROUP BY 2").format(
            i=index, value=value, elements=elements, keep=keep), params


def _sort_keys(plan: SortPlan) -> tuple[list[Query], dict[str, Any]]:
    """The ORDER BY keys of a sort (missing values last in both orders)."""
    direction = sql.SQL("DESC NULLS LAST" if plan.descending else "ASC NULLS LAST")
    if plan.source in ("updated_at", "created_at", "position"):
        return [sql.SQL("p.{} {}").format(sql.Identifier(plan.source), direction)], {}
    if plan.source == "title":
        return [sql.SQL("lower(p.title) {}").format(direction)], {}
    typed = {
        "number": "CASE WHEN jsonb_typeof(k.x) = 'number' THEN k.x::numeric END",
        "datetime": "CASE WHEN jsonb_typeof(k.x) = 'string'"
                    " THEN brainstream_instant(k.x #>> '{}') END",
        "string": "CASE WHEN jsonb_typeof(k.x) = 'string' THEN k.x #>> '{}' END",
        "boolean": "CASE WHEN jsonb_typeof(k.x) = 'boolean' THEN k.x::boolean END",
    }
    if plan.key_type != "any":
        keys = [typed[plan.key_type]]
    else:  # open mode: numbers, then instants, then other strings, then booleans
        keys = [typed["number"], typed["datetime"],
                "CASE WHEN jsonb_typeof(k.x) = 'string'"
                " AND brainstream_instant(k.x #>> '{}') IS NULL THEN k.x #>> '{}' END",
                typed["boolean"]]
    return [sql.SQL("{} {}").format(sql.SQL(k), direction) for k in keys], {
        "sort_key": plan.name}


class PgMatchSet:
    """Facet counts and sorted ids over a search's match set, on one Postgres database;
    `index` (LEXICAL_ENGINE=tantivy) counts the facets it can on the lexical index."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn], *,
                 index: IndexFacets | None = None) -> None:
        self.pool = pool
        self.index = index

    async def _match(self, conn: AsyncConn, namespace: uuid.UUID, query: str,
                     filters: Filters, scope_ids: Sequence[uuid.UUID],
                     candidates: Sequence[uuid.UUID]) -> tuple[Query, dict[str, Any]]:
        """The match set's CTEs (`hit`, `m`: its objects' columns) and their parameters; in
        the caller's transaction, which it sets to use the indexes."""
        await conn.execute(_USE_INDEXES)
        cur = await conn.execute(QUERY_LEXEMES, {"q": query}, prepare=False)
        row = await cur.fetchone()
        frag = filter_conditions(filters, ())  # on the object
        scope: Query = sql.SQL("TRUE")
        if scope_ids:  # a row in scope, or its object
            scope = sql.SQL("(o.id = ANY(%(f_scope)s::uuid[])"
                            " OR coalesce(o.parent_id, o.id) = ANY(%(f_scope)s::uuid[]))")
        params = {**frag.params, "ns": namespace, "f_scope": list(scope_ids),
                  "tsq": tsquery_text(list(row[0]) if row else []),
                  "candidates": list(candidates)}
        return _MATCH.format(where=frag.where, scope=scope), params

    async def facets(self, namespace: uuid.UUID, query: str, filters: Filters,
                     scope_ids: Sequence[uuid.UUID], candidates: Sequence[uuid.UUID],
                     plans: Sequence[FacetPlan]) -> list[FacetCounts]:
        """Per plan, its kept values with their object counts (terms: the most frequent
        first, ties by value; buckets: by value) and the sum of all its values' counts."""
        if not plans:
            return []
        counted: list[FacetCounts | None] = [None] * len(plans)
        if self.index is not None:
            counted = await self.index.facets(namespace, query, filters, scope_ids, candidates,
                                              plans)
        rest = [i for i, c in enumerate(counted) if c is None]
        if rest:
            found = await self._sql_facets(namespace, query, filters, scope_ids, candidates,
                                           [plans[i] for i in rest])
            for i, counts in zip(rest, found, strict=True):
                counted[i] = counts
        return [c if c is not None else FacetCounts([], 0) for c in counted]

    async def _sql_facets(self, namespace: uuid.UUID, query: str, filters: Filters,
                          scope_ids: Sequence[uuid.UUID], candidates: Sequence[uuid.UUID],
                          plans: Sequence[FacetPlan]) -> list[FacetCounts]:
        async with read_connection(self.pool) as conn, conn.transaction():
            match, params = await self._match(conn, namespace, query, filters, scope_ids,
                                              candidates)
            selects: list[Query] = []
            for i, plan in enumerate(plans):
                select, extra = _facet_select(i, plan)
                selects.append(select)
                params.update(extra)
            params["sizes"] = [p.size for p in plans]
            params["terms"] = [p.type == "terms" for p in plans]
            statement = sql.SQL(
                "WITH {match}, g AS ({selects}),"
                " r AS (SELECT i, v, n, sum(n) OVER (PARTITION BY i) AS total,"
                " row_number() OVER (PARTITION BY i ORDER BY CASE WHEN"
                " (%(terms)s::bool[])[i + 1] THEN -n ELSE 0 END, v) AS rk FROM g)"
                " SELECT i, v, n, total FROM r WHERE rk <= (%(sizes)s::int[])[i + 1]"
                " ORDER BY i, rk").format(match=match,
                                          selects=sql.SQL(" UNION ALL ").join(selects))
            cur = await conn.execute(statement, params, prepare=False)
            rows = await cur.fetchall()
        out = [FacetCounts([], 0) for _ in plans]
        for i, value, count, total in rows:
            out[i].values.append((value, int(count)))
            out[i].total = int(total)
        return out

    async def sorted_ids(self, namespace: uuid.UUID, query: str, filters: Filters,
                         scope_ids: Sequence[uuid.UUID], ranked: Sequence[uuid.UUID],
                         plan: SortPlan, limit: int) -> list[uuid.UUID]:
        """The match set's first `limit` objects in the plan's order; ties by their rank in
        `ranked` (the relevance order; objects not in it after those), then by id."""
        if self.index is not None:
            found = await self.index.sorted_ids(namespace, query, filters, scope_ids, ranked,
                                                plan, limit)
            if found is not None:
                return found
        keys, extra = _sort_keys(plan)
        async with read_connection(self.pool) as conn, conn.transaction():
            match, params = await self._match(conn, namespace, query, filters, scope_ids,
                                              ranked)
            statement = sql.SQL(
                "WITH {match}, r(id, rk) AS (SELECT * FROM unnest(%(candidates)s::uuid[])"
                " WITH ORDINALITY)"
                " SELECT p.id FROM m p"
                " CROSS JOIN LATERAL (SELECT CASE jsonb_typeof(p.properties -> %(sort_key)s::text)"
                " WHEN 'array' THEN p.properties -> %(sort_key)s::text -> 0"
                " ELSE p.properties -> %(sort_key)s::text END AS x) AS k"
                " LEFT JOIN r ON r.id = p.id"
                " ORDER BY {keys}, r.rk NULLS LAST, p.id LIMIT %(limit)s").format(
                    match=match, keys=sql.SQL(", ").join(keys))
            params = {**params, "sort_key": None, **extra, "limit": limit}
            cur = await conn.execute(statement, params, prepare=False)
            rows = await cur.fetchall()
        return [row[0] for row in rows]
