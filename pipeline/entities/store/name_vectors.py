"""Entity name vectors (`entity_name_vectors`, migration 0041): which live entities lack one, and
storing them. Written by the proposal pass before it examines entities, and by `brainstream
entities backfill` (`pipeline/entities/name_vectors.py`); read by the resolver's embedding layer
(`resolution.py`, `resolution_batch.py`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
import psycopg

from pipeline.embedding.reuse import lookup_in

Conn = psycopg.Connection[Any]

# The pass's queue without vectors (all of it, or the ids given), oldest first; past a position
# in that order when given (a page after the last: the vectors stored before it are not probed
# again, which made embedding a burst's queue page by page quadratic).
_QUEUED = """
SELECT e.id, e.namespace_id, e.name, q.created_at FROM entity_proposal_queue q
JOIN entities e ON e.id = q.entity_id AND e.merged_into IS NULL
WHERE (%(ids)s::uuid[] IS NULL OR q.entity_id = ANY(%(ids)s::uuid[]))
  AND (%(at)s::timestamptz IS NULL OR (q.created_at, q.entity_id) > (%(at)s, %(id)s::uuid))
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
INSERT INTO entity_name_vectors (entity_id, namespace_id, embedding, name_hash, model)
SELECT v.id, e.namespace_id, v.embedding, v.name_hash, %b
FROM unnest(%b::uuid[], %b::vector[], %b::text[]) AS v(id, embedding, name_hash)
JOIN entities e ON e.id = v.id
ORDER BY v.id ON CONFLICT (entity_id) DO NOTHING"""

Unvectored = tuple[uuid.UUID, uuid.UUID, str]  # entity id, namespace, name
QueuePosition = tuple[datetime, uuid.UUID]  # (created_at, entity id) in the pass's queue


def queued_without(conn: Conn, limit: int, ids: Sequence[uuid.UUID] | None = None
                   ) -> list[Unvectored]:
    """Up to `limit` entities waiting for the proposal pass (of `ids`, or any) with no vector."""
    return queued_page(conn, limit, ids)[0]


def queued_page(conn: Conn, limit: int, ids: Sequence[uuid.UUID] | None = None,
                after: QueuePosition | None = None
                ) -> tuple[list[Unvectored], QueuePosition | None]:
    """`queued_without` past `after`, and the position of the last entity returned (None when
    none was)."""
    at, last = after if after is not None else (None, None)
    rows = conn.execute(_QUEUED, {"ids": list(ids) if ids is not None else None,
                                  "at": at, "id": last, "limit": limit}).fetchall()
    return [(r[0], r[1], str(r[2])) for r in rows], ((rows[-1][3], rows[-1][0]) if rows
                                                     else None)


def live_without(conn: Conn, namespace: uuid.UUID | None, after: uuid.UUID, limit: int
                 ) -> list[Unvectored]:
    """Up to `limit` live entities (of `namespace`, or all) with no vector, ids after `after`."""
    rows = conn.execute(_LIVE, {"ns": namespace, "after": after, "limit": limit}).fetchall()
    return [(r[0], r[1], str(r[2])) for r in rows]


def store(conn: Conn, ids: Sequence[uuid.UUID], vectors: Sequence[Any],
          name_hashes: Sequence[str], model: str) -> int:
    """Store the vectors of `ids` (where none is stored yet) with the hashes of the names and
    the key of the model that embedded them; how many were stored."""
    if not ids:
        return 0
    return conn.execute(_STORE, (model, list(ids),
                                 [np.asarray(v, dtype=np.float32) for v in vectors],
                                 list(name_hashes)), prepare=False).rowcount


# Stored vectors of names by (namespace, name hash) (migration 0042's index); a merged entity's
# row answers too: its name is the same text
stored_vectors = lookup_in("entity_name_vectors", "name_hash")
