"""Reading RELATES facts as of a world time W and as known at a system time K (migration 0053).

A fact counts at (W, K) when it was believed at K (recorded at or before K, not invalidated by
K, its stating row not deleted by K) and held at W: `valid_from <= W < valid_to`, where for a
predicate the catalog marks functional (`relation_types.spec->>'functional'`) its `valid_to` is
cut at the `valid_from` of the next fact believed at K about the same subject and predicate with
another object (ordered by valid_from, NULL first, then object id), so one object holds at a
time and the timeline does not depend on the order the facts arrived in.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection

AsyncConn = AsyncConnection[Any]

_BELIEVED = ("{a}.recorded_at <= %(k)s AND ({a}.invalidated_at IS NULL"
             " OR {a}.invalidated_at > %(k)s)")

# The facts believed at K with their effective valid_to (the functional cut applied).
FACTS_AT = f"""
SELECT f.subject_id, f.predicate, f.object_id, f.valid_from,
       CASE WHEN EXISTS (SELECT 1 FROM relation_types t
                         WHERE lower(t.relation_type) = f.predicate
                           AND t.spec->>'functional' = 'true')
            THEN least(f.valid_to, (
                SELECT min(g.valid_from) FROM entity_facts g
                WHERE g.namespace_id = f.namespace_id AND g.subject_id = f.subject_id
                  AND g.predicate = f.predicate AND g.object_id <> f.object_id
                  AND {_BELIEVED.format(a="g")}
                  AND (coalesce(g.valid_from, '-infinity'), g.object_id)
                      > (coalesce(f.valid_from, '-infinity'), f.object_id)))
            ELSE f.valid_to END AS valid_to,
       f.recorded_at, f.row_id, f.root_id
FROM entity_facts f LEFT JOIN objects r ON r.id = f.row_id
WHERE f.namespace_id = %(ns)s AND f.subject_id IS NOT NULL AND f.object_id IS NOT NULL
  AND {_BELIEVED.format(a="f")} AND (r.deleted_at IS NULL OR r.deleted_at > %(k)s)
"""

# Those holding at W, of the facts FACTS_AT yields (a CTE named `facts`).
HOLDING = """(valid_from IS NULL OR valid_from <= %(w)s) AND (valid_to IS NULL OR valid_to > %(w)s)
  AND (valid_from IS NULL OR valid_to IS NULL OR valid_to > valid_from)"""

ENTITY_FACTS = f"""
WITH facts AS ({FACTS_AT} AND (f.subject_id = %(e)s OR f.object_id = %(e)s))
SELECT x.subject_id, s.name, s.label, x.predicate, x.object_id, o.name, o.label,
       x.valid_from, x.valid_to, min(x.recorded_at),
       array_agg(x.row_id ORDER BY x.row_id), array_agg(x.root_id ORDER BY x.row_id)
FROM facts x JOIN entities s ON s.id = x.subject_id JOIN entities o ON o.id = x.object_id
WHERE {HOLDING}
GROUP BY x.subject_id, s.name, s.label, x.predicate, x.object_id, o.name, o.label,
         x.valid_from, x.valid_to
ORDER BY x.predicate, x.valid_from NULLS FIRST, x.subject_id, x.object_id
LIMIT %(limit)s
"""


@dataclass(frozen=True)
class FactEnd:
    id: uuid.UUID
    name: str
    label: str


@dataclass(frozen=True)
class Fact:
    """One fact holding at W as known at K, with the rows stating it (and their objects)."""

    subject: FactEnd
    predicate: str
    object: FactEnd
    valid_from: datetime | None
    valid_to: datetime | None
    recorded_at: datetime
    rows: list[tuple[uuid.UUID, uuid.UUID]]


async def entity_facts(conn: AsyncConn, namespace: uuid.UUID, entity_id: uuid.UUID,
                       as_of: datetime, known_at: datetime, limit: int) -> list[Fact]:
    """The facts naming the entity (as subject or object) at (as_of, known_at)."""
    cur = await conn.execute(ENTITY_FACTS, {"ns": namespace, "e": entity_id, "w": as_of,
                                            "k": known_at, "limit": limit}, prepare=False)
    out = []
    for sid, sn, sl, p, oid, on, ol, vf, vt, rec, rows, roots in await cur.fetchall():
        seen: dict[uuid.UUID, uuid.UUID] = {}
        for r, root in zip(rows, roots, strict=False):
            seen.setdefault(r, root)
        out.append(Fact(FactEnd(sid, sn, sl), p, FactEnd(oid, on, ol), vf, vt, rec,
                        sorted(seen.items())))
    return out
