"""History reads on Postgres: a link's versions (by its id, or by its ends and type) and an
object's, within the caller's namespace only (another namespace's link or object is not found,
as one that does not exist)."""

from __future__ import annotations

import uuid

from psycopg_pool import AsyncConnectionPool

from pipeline.domain.errors import NotFound
from pipeline.domain.history import LinkHistory, LinkVersion, ObjectVersion
from pipeline.postgres.pool import AsyncConn, read_connection

_LINK_VERSIONS = """
SELECT seq, state, meta, valid_from, valid_to, asserted_to, recorded_at, recorded_by, change,
       invalidated_at, invalidated_by
FROM link_versions
WHERE from_id = %(from)s AND relation_type = %(type)s AND to_id = %(to)s
  AND namespace_id = %(ns)s
ORDER BY seq
"""

_OBJECT_VERSIONS = """
SELECT seq, change, event_id, source, event_version, kind, title, properties, index_text_hash,
       recorded_at
FROM object_versions WHERE object_id = %(id)s AND namespace_id = %(ns)s ORDER BY seq
"""


class PgHistoryReader:
    """The versions of links and objects, one namespace at a time."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn]) -> None:
        self.pool = pool

    async def link_by_id(self, namespace: uuid.UUID, link_id: uuid.UUID) -> LinkHistory:
        """The history of the link with this id (pipeline/domain/links.py); NotFound when the
        namespace has none."""
        async with read_connection(self.pool) as conn:
            cur = await conn.execute(
                "SELECT from_id, relation_type, to_id FROM links"
                " WHERE link_id = %s AND namespace_id = %s", (link_id, namespace))
            row = await cur.fetchone()
        if row is None:
            raise NotFound("no such link in this namespace", field="link_id")
        return await self.link(namespace, row[0], row[1], row[2])

    async def link(self, namespace: uuid.UUID, from_id: uuid.UUID, relation_type: str,
                   to_id: uuid.UUID) -> LinkHistory:
        """The history of the link (from, type, to), in the order written; NotFound when the
        namespace has none."""
        async with read_connection(self.pool) as conn:
            cur = await conn.execute(_LINK_VERSIONS, {"from": from_id, "type": relation_type,
                                                      "to": to_id, "ns": namespace})
            rows = await cur.fetchall()
        if not rows:
            raise NotFound("no such link in this namespace", field="link_id")
        return LinkHistory(from_id, relation_type, to_id, [LinkVersion(*r) for r in rows])

    async def object(self, namespace: uuid.UUID, object_id: uuid.UUID) -> list[ObjectVersion]:
        """The versions of a first-class object, in order; NotFound when the namespace has
        none."""
        async with read_connection(self.pool) as conn:
            cur = await conn.execute(_OBJECT_VERSIONS, {"id": object_id, "ns": namespace})
            rows = await cur.fetchall()
        if not rows:
            raise NotFound("no such object in this namespace", field="object_id")
        return [ObjectVersion(*r) for r in rows]
