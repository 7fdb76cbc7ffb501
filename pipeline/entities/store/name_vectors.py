"""Entity name vectors (`entity_name_vectors`, migration 0041): which live entities lack one, and
storing them. Written by the proposal pass before it examines entities, and by `brainstream
entities backfill` (`pipeline/entities/name_vectors.py`); read by the resolver's embedding layer
(`resolution.py`, `resolution_batch.py`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

Conn = psycopg.Connection[Any]

# The pass's queue without vectors (all of it, or the ids given), oldest first.
_QUEUED = """
SELECT e.id, e.namespace_id, e.name FROM entity_proposal_queue q
JOIN entities e ON e.id = q.entity_id AND e.merged_into IS NULL
WHERE (%(ids)s::uuid[] IS NULL OR q.entity_id = ANY(%(ids)s::uuid[]))
  AND NOT EXISTS (SELECT 1 FROM entity_name_vectors v WHERE v.entity_id = e.id)
ORDER BY q.created_at, q.entity_id LIMIT %(limit)s"""

# Live entities without a vector (of one namespace, or all), by id after a cursor.
_LIVE = """
SELECT e.id, e.namespace_id, e.name FROM entities e
WHERE e.merged_into IS NULL AND (%(ns)s::uuid IS NULL OR e.namespace_id = %(ns)s)
  AND e.id > %(after)s
  AND NOT EXISTS (SELECT 1 FROM entity_name_vectors v WHERE v.entity_id = e.id)
ORDER BY e.id LIMIT %(limit)s"""

# Only where none was stored meanwhile, and only for entities still there.
_STORE = """
INSERT INTO entity_name_vectors (entity_id, namespace_id, embedding)
SELECT v.id, e.namespace_id, v.embedding
FROM unnest(%b::uuid[], %b::vector[]) AS v(id, embedding) JOIN entities e ON e.id = v.id
ORDER BY v.id ON CONFLICT (entity_id) DO NOTHING"""

Unvectored = tuple[uuid.UUID, uuid.UUID, str]  # entity id, namespace, name


def queued_without(conn: Conn, limit: int, ids: Sequence[uuid.UUID] | None = None
                   ) -> list[Unvectored]:
    """Up to `limit` entities waiting for the proposal pass (of `ids`, or any) with no vector."""
    rows = conn.execute(_QUEUED, {"ids": list(ids) if ids is not None else None,
                                  "limit": limit}).fetchall()
    return [(r[0], r[1], str(r[2])) for r in rows]


def live_without(conn: Conn, namespace: uuid.UUID | None, after: uuid.UUID, limit: int
                 ) -> list[Unvectored]:
    """Up to `limit` live entities (of `namespace`, or all) with no vector, ids after `after`."""
    rows = conn.execute(_LIVE, {"ns": namespace, "after": after, "limit": limit}).fetchall()
    return [(r[0], r[1], str(r[2])) for r in rows]


def store(conn: Conn, ids: Sequence[uuid.UUID], vectors: Sequence[Any]) -> int:
    """Store the vectors of `ids` (where none is stored yet); how many were stored."""
    if not ids:
        return 0
    return conn.execute(_STORE, (list(ids), [np.asarray(v, dtype=np.float32) for v in vectors]),
                        prepare=False).rowcount
