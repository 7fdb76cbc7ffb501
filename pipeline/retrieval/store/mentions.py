"""`MentionReader` on Postgres: the entities an object names, for `GET /v1/objects/{id}`.

An object's mentions are those of its own row and of its live parts, within the caller's
namespace only; the caller has already checked that the object is visible. Both lists are
capped: the most mentioned entities first, each with its first mentions in reading order
(the object's own fields, then its parts by position).
"""

from __future__ import annotations

import uuid

from psycopg_pool import AsyncConnectionPool

from pipeline.domain.mentions import MentionSpan, ObjectEntity
from pipeline.postgres.pool import AsyncConn, read_connection

_OBJECT_ENTITIES = """
WITH r AS (SELECT o.id, coalesce(o.position, -1) AS pos FROM objects o
           WHERE o.namespace_id = %(ns)s AND o.deleted_at IS NULL
             AND (o.id = %(id)s OR o.parent_id = %(id)s)),
n AS (SELECT m.entity_id, count(*) AS n FROM mentions m JOIN r ON r.id = m.row_id
      WHERE m.namespace_id = %(ns)s GROUP BY m.entity_id
      ORDER BY count(*) DESC, m.entity_id LIMIT %(entities)s)
SELECT e.id, e.name, e.label, n.n,
       (SELECT coalesce(json_agg(json_build_array(x.row_id, x.field, x.start_pos, x.end_pos,
                                                  x.text)), '[]')
        FROM (SELECT m.row_id, m.field, m.start_pos, m.end_pos, m.text
              FROM mentions m JOIN r ON r.id = m.row_id
              WHERE m.entity_id = e.id AND m.namespace_id = %(ns)s
              ORDER BY r.pos, array_position(ARRAY['title', 'summary', 'content'], m.field),
                       m.start_pos
              LIMIT %(mentions)s) x)
FROM n JOIN entities e ON e.id = n.entity_id AND e.namespace_id = %(ns)s
ORDER BY n.n DESC, e.id
"""


class PgMentionReader:
    """Reads of the entity layer for the API (one namespace at a time)."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn]) -> None:
        self.pool = pool

    async def object_entities(self, namespace: uuid.UUID, object_id: uuid.UUID, *,
                              max_entities: int, max_mentions: int
                              ) -> tuple[list[ObjectEntity], bool]:
        """The entities the object names (at most `max_entities`, each with at most
        `max_mentions` mentions) and whether more entities were left out."""
        async with read_connection(self.pool) as conn:
            cur = await conn.execute(_OBJECT_ENTITIES, {
                "ns": namespace, "id": object_id, "entities": max_entities + 1,
                "mentions": max_mentions})
            rows = await cur.fetchall()
        out = [ObjectEntity(eid, name, label, int(n), [
            MentionSpan(uuid.UUID(str(m[0])), str(m[1]), int(m[2]), int(m[3]), str(m[4]))
            for m in spans]) for eid, name, label, n, spans in rows]
        return out[:max_entities], len(out) > max_entities
