"""What the relay reads of Postgres: the current state of the aggregates outbox rows name.

The relay writes the graph from these rows, never from the outbox payload, so a row applied
twice, late or out of order writes the same state.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from pipeline.outbox.ops import LinkKey
from pipeline.outbox.store import Conn


class NodeRow(NamedTuple):
    """An object as the graph mirrors it, with the embedding state of its parts."""

    id: uuid.UUID
    namespace_id: uuid.UUID
    kind: str
    title: str | None
    summary: str | None
    properties: dict[str, Any] | None
    content: str | None
    parent_id: uuid.UUID | None
    deleted_at: datetime | None
    embedding: Any
    embedded_hash: str | None
    embed_status: str
    updated_at: datetime
    parts_pending: int
    parts: int


class EdgeRow(NamedTuple):
    """A link, and whether the graph should have it (it and both endpoints are live objects)."""

    from_id: uuid.UUID
    relation_type: str
    to_id: uuid.UUID
    namespace_id: uuid.UUID
    meta: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    live: bool


_NODES = """
SELECT o.id, o.namespace_id, o.kind, o.title, o.summary, o.properties, o.content, o.parent_id,
       o.deleted_at, e.embedding, e.embedded_hash, coalesce(e.embed_status, 'pending'),
       o.updated_at,
       (SELECT count(*) FROM object_embeddings y JOIN objects x ON x.id = y.id
        WHERE y.root_id = o.id AND y.embed_status = 'pending' AND x.parent_id = o.id
          AND x.deleted_at IS NULL) AS parts_pending,
       (SELECT count(*) FROM objects x WHERE x.parent_id = o.id AND x.deleted_at IS NULL)
FROM objects o LEFT JOIN object_embeddings e ON e.id = o.id WHERE o.id = ANY(%s)
"""

_EDGES = """
SELECT l.from_id, l.relation_type, l.to_id, l.namespace_id, l.meta, l.created_at, l.updated_at,
       l.deleted_at IS NULL
         AND f.deleted_at IS NULL AND f.parent_id IS NULL
         AND t.deleted_at IS NULL AND t.parent_id IS NULL AS live
FROM links l JOIN objects f ON f.id = l.from_id JOIN objects t ON t.id = l.to_id
WHERE (l.from_id, l.relation_type, l.to_id) IN (SELECT * FROM unnest(%s::uuid[], %s::text[],
                                                                     %s::uuid[]))
"""

_INCIDENT = """
SELECT l.from_id, l.relation_type, l.to_id FROM links l
JOIN objects f ON f.id = l.from_id JOIN objects t ON t.id = l.to_id
WHERE (l.from_id = ANY(%(ids)s) OR l.to_id = ANY(%(ids)s)) AND l.deleted_at IS NULL
  AND f.deleted_at IS NULL AND t.deleted_at IS NULL
"""


def load_nodes(conn: Conn, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, NodeRow]:
    """The rows of `ids` that exist (deleted ones and parts included)."""
    rows = conn.execute(_NODES, (list(ids),)).fetchall()
    return {row[0]: NodeRow(*row) for row in rows}


def load_edges(conn: Conn, keys: Sequence[LinkKey]) -> dict[LinkKey, EdgeRow]:
    """The links of `keys` that exist (deleted ones included)."""
    rows = conn.execute(_EDGES, ([k[0] for k in keys], [k[1] for k in keys],
                                 [k[2] for k in keys])).fetchall()
    return {(row[0], row[1], row[2]): EdgeRow(*row) for row in rows}


def incident_links(conn: Conn, ids: Sequence[uuid.UUID]) -> list[LinkKey]:
    """The live links touching `ids` whose endpoints are both live."""
    rows = conn.execute(_INCIDENT, {"ids": list(ids)}).fetchall()
    return [(row[0], row[1], row[2]) for row in rows]
