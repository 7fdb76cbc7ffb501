"""`EntityGraph` on Postgres: the entity layer (migration 0012) as PPR retrieval walks it.

Every statement names the namespace and joins mentions to live rows (`deleted_at IS NULL`, the
row's promoted object too), and reads only live entities (`merged_into IS NULL`): a merged
entity's mentions and edges have moved to its survivor. Statements run unprepared, like the
search channels', so each is planned for its namespace. The walk's indexes: mentions by entity
(`mentions_entity`) and by row (its primary key), edges by either end, names by norm, alias
and fold (`entities_ns_fold`, migration 0015).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from pipeline.domain.entity_reads import EntityLink, EntityRef, Hop, NameMatch, RowMention
from pipeline.domain.read_model import Filters
from pipeline.entities.store.fact_reads import FACTS_AT, HOLDING
from pipeline.fairness.tenant import detached
from pipeline.postgres.pool import AsyncConn, read_connection
from pipeline.retrieval.store.filters import SEARCHABLE_FROM, searchable

log = logging.getLogger(__name__)

MATCH_NAMES = sql.SQL(
    "SELECT k.key, 'exact', e.id, e.name, e.part_count"
    " FROM unnest(%(keys)s::text[]) AS k(key) JOIN entities e"
    " ON e.namespace_id = %(ns)s AND e.norm = k.key AND e.merged_into IS NULL"
    " UNION ALL"
    " SELECT k.key, 'alias', e.id, e.name, e.part_count"
    " FROM unnest(%(keys)s::text[]) AS k(key) JOIN entity_aliases a"
    " ON a.namespace_id = %(ns)s AND a.norm = k.key"
    " JOIN entities e ON e.id = a.entity_id AND e.merged_into IS NULL"
    " UNION ALL"
    " SELECT brainstream_name_fold(e.norm), 'fold', e.id, e.name, e.part_count FROM entities e"
    " WHERE e.namespace_id = %(ns)s AND e.merged_into IS NULL"
    " AND brainstream_name_fold(e.norm) = ANY(%(folds)s::text[])")

# The entities live messages of live sessions name (migration 0055), the first span of each.
MESSAGE_ENTITIES = sql.SQL(
    "SELECT DISTINCT ON (e.id) mm.text, e.id, e.name, e.part_count"
    " FROM message_mentions mm"
    " JOIN messages g ON g.namespace_id = mm.namespace_id AND g.uuid = mm.message_uuid"
    " AND g.deleted_at IS NULL"
    " JOIN sessions s ON s.id = g.session_pk AND s.deleted_at IS NULL"
    " JOIN entities e ON e.id = mm.entity_id AND e.merged_into IS NULL"
    " WHERE mm.namespace_id = %(ns)s AND mm.message_uuid = ANY(%(ids)s::uuid[])"
    " ORDER BY e.id, mm.message_uuid, mm.start_pos")

LIVE_ROWS = sql.SQL(
    "SELECT count(*) FROM objects WHERE namespace_id = %(ns)s AND deleted_at IS NULL")

# A row is live when it and its promoted object are; `LIMIT` per entity bounds a popular one.
_LIVE_ROW = ("JOIN objects o ON o.id = m.row_id AND o.namespace_id = %(ns)s"
             " AND o.deleted_at IS NULL"
             " JOIN objects p ON p.id = coalesce(o.parent_id, o.id) AND p.deleted_at IS NULL")

# One hop, one statement: (kind, k1, k2, object, is_part, count, edge type, status, count2),
# ordered by kind then (k1, k2) so the walk numbers its nodes the same way every time.
# kind 0, rows naming an entity: k1 entity, k2 row (the first `cap` live rows by row id);
# kind 1, entities a row names: k1 row, k2 entity; kind 2, walkable edges: k1 from, k2 to
# (the first `limit` by (from, to)). `count` is the entity's (or edge's from end's) live rows.
# Kind 0 reads `mentions_entity` in row order and stops at `cap` distinct live rows (DISTINCT
# ON the row, the index's order: not every mention of a popular entity joined and sorted); the
# entity is of the namespace, so its mentions are too, and the row's namespace is checked.
# Kind 1 checks each asked row once, then joins its mentions' entities.
HOP_ROWS = (
    "SELECT 0 AS kind, e.id AS k1, r.row_id AS k2, r.object_id, r.is_part, e.part_count,"
    " NULL::text, NULL::text, NULL::int"
    " FROM unnest(%(entities)s::uuid[]) AS q(id)"
    " JOIN entities e ON e.id = q.id AND e.namespace_id = %(ns)s AND e.merged_into IS NULL"
    " CROSS JOIN LATERAL (SELECT DISTINCT ON (m.row_id) m.row_id, p.id AS object_id,"
    " o.parent_id IS NOT NULL AS is_part FROM mentions m " + _LIVE_ROW +
    " WHERE m.entity_id = e.id ORDER BY m.row_id LIMIT %(cap)s) AS r"
    " UNION ALL"
    " SELECT 1, r.row_id, e.id, r.object_id, r.is_part, e.part_count,"
    " NULL::text, NULL::text, NULL::int"
    " FROM (SELECT o.id AS row_id, p.id AS object_id, o.parent_id IS NOT NULL AS is_part"
    " FROM objects o JOIN objects p ON p.id = coalesce(o.parent_id, o.id)"
    " AND p.deleted_at IS NULL WHERE o.id = ANY(%(rows)s::uuid[]) AND o.namespace_id = %(ns)s"
    " AND o.deleted_at IS NULL) AS r"
    " JOIN (SELECT DISTINCT m.row_id, m.entity_id FROM mentions m"
    " WHERE m.row_id = ANY(%(rows)s::uuid[]) AND m.namespace_id = %(ns)s) AS n"
    " ON n.row_id = r.row_id"
    " JOIN entities e ON e.id = n.entity_id AND e.merged_into IS NULL")
HOP_EDGES = (
    " (SELECT 2, x.from_id, x.to_id, NULL::uuid, NULL::bool, f.part_count, x.edge_type,"
    " x.status, t.part_count"
    " FROM entity_edges x"
    " JOIN entities f ON f.id = x.from_id AND f.merged_into IS NULL"
    " JOIN entities t ON t.id = x.to_id AND t.merged_into IS NULL"
    " WHERE x.namespace_id = %(ns)s AND (x.from_id = ANY(%(entities)s::uuid[])"
    " OR x.to_id = ANY(%(entities)s::uuid[]))"
    " AND x.edge_type IN ('RELATES', 'POSSIBLY_SAME') AND x.status IS DISTINCT FROM 'refused'"
    " ORDER BY x.from_id, x.to_id LIMIT %(limit)s)")
HOP = sql.SQL(HOP_ROWS + " UNION ALL " + HOP_EDGES + " ORDER BY 1, 2, 3")

# The hop of a walk at (world time W, system time K), `as_of` / `known_at` on a PPR search:
# RELATES edges of supplied facts count as the facts counting at (W, K) do
# (pipeline/entities/store/fact_reads.py); an extractor's RELATES (no fact states it) and
# POSSIBLY_SAME edges carry no time and count as now.
HOP_AT = sql.SQL(
    "WITH facts AS (" + FACTS_AT + " AND (f.subject_id = ANY(%(entities)s::uuid[])"
    " OR f.object_id = ANY(%(entities)s::uuid[]))) "
    + HOP_ROWS + " UNION ALL "
    + HOP_EDGES.replace(
        " ORDER BY x.from_id",
        " AND (x.edge_type <> 'RELATES' OR NOT EXISTS (SELECT 1 FROM entity_facts g"
        " WHERE g.namespace_id = x.namespace_id AND g.subject_id = x.from_id"
        " AND g.predicate = x.predicate AND g.object_id = x.to_id))"
        " ORDER BY x.from_id")
    + " UNION ALL (SELECT DISTINCT 2, x.subject_id, x.object_id, NULL::uuid, NULL::bool,"
    " f.part_count, 'RELATES', NULL::text, t.part_count FROM facts x"
    " JOIN entities f ON f.id = x.subject_id AND f.merged_into IS NULL"
    " JOIN entities t ON t.id = x.object_id AND t.merged_into IS NULL"
    " WHERE x.subject_id <> x.object_id AND " + HOLDING +
    " ORDER BY 2, 3 LIMIT %(limit)s)"
    " ORDER BY 1, 2, 3")

# `o.id = ANY OR o.parent_id = ANY` is implied by `p.id = ANY` (p is o's parent, or o itself);
# stated, it reads the objects and their parts by index instead of joining every row of the
# namespace to its promoted object.
VISIBLE_OBJECTS = sql.SQL(
    "SELECT DISTINCT p.id FROM {from_} WHERE {where} AND p.id = ANY(%(objs)s::uuid[])"
    " AND (o.id = ANY(%(objs)s::uuid[]) OR o.parent_id = ANY(%(objs)s::uuid[]))")


def _hop(rows: Sequence[tuple[Any, ...]]) -> Hop:
    hop = Hop([], [], [])
    for kind, k1, k2, obj, is_part, count, edge_type, status, count2 in rows:
        if kind == 0:
            hop.rows_of.append(RowMention(k2, obj, bool(is_part), k1, int(count)))
        elif kind == 1:
            hop.entities_of.append(RowMention(k1, obj, bool(is_part), k2, int(count)))
        else:
            hop.links.append(EntityLink(k1, k2, edge_type, status, int(count), int(count2)))
    return hop


class PgEntityGraph:
    """The entity layer of one database, for PPR. `live_rows` is cached per namespace (the hub
    rule needs the namespace's size, not to the row): counted on first use, then recounted in
    the background once `rows_ttl` seconds old, the cached count answering meanwhile, so only
    a namespace's first search waits for the count."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn], *, rows_ttl: float = 300.0
                 ) -> None:
        self.pool = pool
        self.rows_ttl = rows_ttl
        self._rows: dict[uuid.UUID, tuple[float, int]] = {}
        self._recounting: dict[uuid.UUID, asyncio.Task[int]] = {}

    async def _fetch(self, query: sql.SQL | sql.Composed, params: dict[str, Any]
                     ) -> list[tuple[Any, ...]]:
        async with read_connection(self.pool) as conn:
            cur = await conn.execute(query, params, prepare=False)
            rows: list[tuple[Any, ...]] = await cur.fetchall()
        return rows

    async def match_names(self, namespace: uuid.UUID, keys: Sequence[str],
                          folds: Sequence[str]) -> list[NameMatch]:
        """Entities by normalised name, alias (keys) and folded name (folds)."""
        if not keys and not folds:
            return []
        rows = await self._fetch(MATCH_NAMES, {"ns": namespace, "keys": list(keys),
                                               "folds": list(folds)})
        return [NameMatch(r[0], r[1], EntityRef(r[2], r[3], int(r[4]))) for r in rows]

    async def message_entities(self, namespace: uuid.UUID, message_ids: Sequence[uuid.UUID]
                               ) -> list[tuple[str, EntityRef]]:
        """The live entities live messages among `message_ids` name (a span's text each)."""
        if not message_ids:
            return []
        rows = await self._fetch(MESSAGE_ENTITIES, {"ns": namespace, "ids": list(message_ids)})
        return [(str(r[0]), EntityRef(r[1], r[2], int(r[3]))) for r in rows]

    async def live_rows(self, namespace: uuid.UUID) -> int:
        """Live rows of the namespace: cached, recounted in the background when stale."""
        cached = self._rows.get(namespace)
        if cached is None:
            return await self._count_rows(namespace)
        if time.monotonic() - cached[0] >= self.rows_ttl and namespace not in self._recounting:
            task = detached(self._count_rows(namespace))
            self._recounting[namespace] = task
            task.add_done_callback(lambda done: self._recounted(namespace, done))
        return cached[1]

    async def _count_rows(self, namespace: uuid.UUID) -> int:
        started = time.monotonic()
        rows = await self._fetch(LIVE_ROWS, {"ns": namespace})
        count = int(rows[0][0])
        self._rows[namespace] = (started, count)
        return count

    def _recounted(self, namespace: uuid.UUID, task: asyncio.Task[int]) -> None:
        self._recounting.pop(namespace, None)
        if not task.cancelled() and task.exception() is not None:
            # the stale count keeps answering; the next search after the TTL tries again
            log.warning("recounting the live rows of %s failed: %s", namespace,
                        task.exception())

    async def hop(self, namespace: uuid.UUID, entity_ids: Sequence[uuid.UUID],
                  row_ids: Sequence[uuid.UUID], per_entity: int, link_limit: int) -> Hop:
        """Rows of `entity_ids` (`per_entity` each), entities of `row_ids`, and the RELATES and
        unrefused POSSIBLY_SAME edges touching `entity_ids` (`link_limit`): one statement."""
        if not entity_ids and not row_ids:
            return Hop([], [], [])
        return _hop(await self._fetch(HOP, {
            "ns": namespace, "entities": list(entity_ids), "rows": list(row_ids),
            "cap": max(per_entity, 0), "limit": max(link_limit, 0)}))

    async def hop_at(self, namespace: uuid.UUID, entity_ids: Sequence[uuid.UUID],
                     row_ids: Sequence[uuid.UUID], per_entity: int, link_limit: int,
                     at: tuple[datetime, datetime]) -> Hop:
        """`hop` with the RELATES facts counting at `at` (world time, system time) in place of
        the current RELATES edges of supplied facts (`ppr_facts.HOP_AT`)."""
        if not entity_ids and not row_ids:
            return Hop([], [], [])
        return _hop(await self._fetch(HOP_AT, {
            "ns": namespace, "entities": list(entity_ids), "rows": list(row_ids),
            "cap": max(per_entity, 0), "limit": max(link_limit, 0), "w": at[0], "k": at[1]}))

    async def visible_objects(self, namespace: uuid.UUID, object_ids: Sequence[uuid.UUID],
                              filters: Filters, scope_ids: Sequence[uuid.UUID]
                              ) -> set[uuid.UUID]:
        """Objects with a searchable row that pass the namespace, filters and scope."""
        if not object_ids:
            return set()
        frag = searchable(namespace, filters, scope_ids)
        query = VISIBLE_OBJECTS.format(from_=SEARCHABLE_FROM, where=frag.where)
        rows = await self._fetch(query, {**frag.params, "objs": list(object_ids)})
        return {r[0] for r in rows}
