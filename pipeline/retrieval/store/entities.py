"""`EntityReader` on Postgres: entity find by name (for `find_objects` with entities) and the
entity part of `/v1/schema` (labels and edge types with counts), per namespace.

An entity is shown only while it is not merged away and some live row of the namespace names it,
so the names of deleted content never come back through entity find.
"""

from __future__ import annotations

import uuid
from typing import Any

from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from pipeline.domain.read_model import EntityMatch
from pipeline.postgres.pool import AsyncConn, read_connection
from pipeline.retrieval.store.search_sql import TRIGRAM_THRESHOLD

# Candidates by name: the exact normalised name, an alias's, and trigram-near names and aliases
# (the `%` operator: the trigram GIN indexes of migration 0012). Each entity once, its best way.
_FIND = sql.SQL("""
WITH cand AS (
    SELECT e.id, 'exact' AS matched, 1.0::float8 AS score, NULL::text AS via FROM entities e
    WHERE e.namespace_id = %(ns)s AND e.norm = %(q)s AND e.merged_into IS NULL
    UNION ALL
    SELECT a.entity_id, 'alias', 0.95, a.alias FROM entity_aliases a
    WHERE a.namespace_id = %(ns)s AND a.norm = %(q)s
    UNION ALL
    (SELECT e.id, 'trigram', similarity(e.norm, %(q)s)::float8 * 0.9, NULL FROM entities e
     WHERE e.namespace_id = %(ns)s AND e.norm %% %(q)s AND e.merged_into IS NULL
     ORDER BY similarity(e.norm, %(q)s) DESC, e.id LIMIT %(cap)s)
    UNION ALL
    (SELECT a.entity_id, 'trigram', similarity(a.norm, %(q)s)::float8 * 0.85, a.alias
     FROM entity_aliases a
     WHERE a.namespace_id = %(ns)s AND a.norm %% %(q)s
     ORDER BY similarity(a.norm, %(q)s) DESC, a.entity_id LIMIT %(cap)s)
), best AS (
    SELECT DISTINCT ON (c.id) c.* FROM cand c ORDER BY c.id, c.score DESC
)
SELECT e.id, e.name, e.label, e.part_count, b.matched, b.score, b.via
FROM best b JOIN entities e ON e.id = b.id
WHERE e.namespace_id = %(ns)s AND e.merged_into IS NULL
  AND EXISTS (SELECT 1 FROM mentions m JOIN objects r ON r.id = m.row_id
              WHERE m.entity_id = e.id AND r.namespace_id = %(ns)s AND r.deleted_at IS NULL
                AND (r.parent_id IS NULL OR EXISTS (SELECT 1 FROM objects p
                     WHERE p.id = r.parent_id AND p.deleted_at IS NULL)))
ORDER BY b.score DESC, e.part_count DESC, e.id
LIMIT %(limit)s
""")

# Labels of the namespace's entities (not merged away, named by some live row: `part_count`).
_LABELS = sql.SQL("""
SELECT label, count(*) AS n FROM entities
WHERE namespace_id = %(ns)s AND merged_into IS NULL AND part_count > 0
GROUP BY label ORDER BY n DESC, label
""")

# Entity edge types (POSSIBLY_SAME by status), between entities not merged away.
_EDGE_TYPES = sql.SQL("""
SELECT ee.edge_type, coalesce(ee.status, '') AS status, count(*) AS n FROM entity_edges ee
JOIN entities f ON f.id = ee.from_id AND f.merged_into IS NULL
JOIN entities t ON t.id = ee.to_id AND t.merged_into IS NULL
WHERE ee.namespace_id = %(ns)s
GROUP BY ee.edge_type, coalesce(ee.status, '') ORDER BY ee.edge_type, 2
""")

# The most frequent predicates of RELATES edges.
_PREDICATES = sql.SQL("""
SELECT predicate, count(*) AS n FROM entity_edges
WHERE namespace_id = %(ns)s AND edge_type = 'RELATES'
GROUP BY predicate ORDER BY n DESC, predicate LIMIT %(limit)s
""")


class PgEntityReader:
    """`EntityReader` on Postgres (see the module's docstring)."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn], *,
                 trigram_threshold: float = 0.3) -> None:
        self.pool = pool
        self.trigram_threshold = trigram_threshold

    async def _rows(self, query: sql.SQL | sql.Composed, params: dict[str, Any]
                    ) -> list[dict[str, Any]]:
        async with read_connection(self.pool) as conn, conn.transaction(), \
                conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(TRIGRAM_THRESHOLD, (str(self.trigram_threshold),))
            await cur.execute(query, params)
            return await cur.fetchall()

    async def find_by_name(self, namespace: uuid.UUID, norm: str, limit: int
                           ) -> list[EntityMatch]:
        """Entities named `norm` (normalised), by alias, or trigram-near, best first."""
        rows = await self._rows(_FIND, {"ns": namespace, "q": norm, "limit": limit,
                                        "cap": max(limit * 4, 50)})
        return [EntityMatch(id=r["id"], name=r["name"], label=r["label"],
                            part_count=r["part_count"], matched=r["matched"],
                            score=float(r["score"]), via=r["via"]) for r in rows]

    async def label_counts(self, namespace: uuid.UUID) -> list[tuple[str, int]]:
        """(label, entities) of the namespace, most first."""
        return [(r["label"], r["n"]) for r in await self._rows(_LABELS, {"ns": namespace})]

    async def edge_type_counts(self, namespace: uuid.UUID
                               ) -> list[tuple[str, str, int]]:
        """(edge type, status or "", edges) of the namespace."""
        return [(r["edge_type"], r["status"], r["n"])
                for r in await self._rows(_EDGE_TYPES, {"ns": namespace})]

    async def predicate_counts(self, namespace: uuid.UUID, limit: int
                               ) -> list[tuple[str, int]]:
        """(predicate, RELATES edges) of the namespace, most first, at most `limit`."""
        return [(r["predicate"], r["n"])
                for r in await self._rows(_PREDICATES, {"ns": namespace, "limit": limit})]
