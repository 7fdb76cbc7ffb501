"""The reads behind an entity's page and the curator's queue: what an entity's live mentions say
about it (labels, counts), its strongest neighbours, its mentions a page at a time, and the
POSSIBLY_SAME pairs of one status with the evidence a curator decides on. Plans
(`pipeline/postgres/plans.py`), run by the API on its async pool and by the CLI on a
synchronous connection.

A mention counts only in a live row (not deleted, nor a part of a deleted object), like every
count of the layer; a neighbour or a pair's entity is shown only while it is not merged away and
some live row names it, so the names of deleted content never come back.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.entities.pages import SNIPPET_CONTEXT, Snippet, snippet
from pipeline.entities.store import resolution
from pipeline.entities.store.resolution import EntityRecord
from pipeline.postgres.plans import Plan, Statement

# Edges a neighbour is joined by: co-occurrence, a stated relation, a pair a person verified
# (a held or deferred pair is a question, not a neighbour).
_JOINS = ("(ee.edge_type IN ('CO_OCCURS', 'RELATES')"
          " OR (ee.edge_type = 'POSSIBLY_SAME' AND ee.status = 'verified'))")

_LIVE_ROW = ("o.deleted_at IS NULL AND (o.parent_id IS NULL OR EXISTS (SELECT 1 FROM objects p"
             " WHERE p.id = o.parent_id AND p.deleted_at IS NULL))")

_PROFILE = f"""
WITH live AS (
    SELECT m.label, coalesce(o.parent_id, o.id) AS object_id FROM mentions m
    JOIN objects o ON o.id = m.row_id
    WHERE m.namespace_id = %(ns)s AND m.entity_id = %(id)s AND {_LIVE_ROW})
SELECT (SELECT count(*) FROM live), (SELECT count(DISTINCT object_id) FROM live),
       ARRAY(SELECT label FROM live GROUP BY label ORDER BY count(*) DESC, label),
       ARRAY(SELECT count(*) FROM live GROUP BY label ORDER BY count(*) DESC, label)"""

# Both directions, each on an index of its own (the primary key from `from_id`, 0012's
# entity_edges_to); the strongest first.
_NEIGHBOURS = f"""
SELECT x.other, e.name, e.label, x.edge_type, x.predicate, x.weight::float8, x.outgoing
FROM (SELECT ee.to_id AS other, ee.edge_type, ee.predicate, ee.weight, true AS outgoing
      FROM entity_edges ee WHERE ee.from_id = %(id)s AND ee.namespace_id = %(ns)s AND {_JOINS}
      UNION ALL
      SELECT ee.from_id, ee.edge_type, ee.predicate, ee.weight, false
      FROM entity_edges ee WHERE ee.to_id = %(id)s AND ee.namespace_id = %(ns)s AND {_JOINS}
     ) AS x
JOIN entities e ON e.id = x.other AND e.merged_into IS NULL AND e.part_count > 0
ORDER BY x.weight DESC, e.name, x.other, x.edge_type, x.predicate LIMIT %(n)s"""

# The text of a mention's field around its span (SNIPPET_CONTEXT either side), where that text
# starts in the field, and the field's length: the snippet is cut in Python (pages.py).
_WINDOW = """
greatest(m.start_pos - %(ctx)s, 0) AS wstart,
substr(f.t, greatest(m.start_pos - %(ctx)s, 0) + 1,
       m.end_pos - greatest(m.start_pos - %(ctx)s, 0) + %(ctx)s) AS win,
coalesce(length(f.t), 0) AS flen"""
_FIELD = ("CROSS JOIN LATERAL (SELECT CASE m.field WHEN 'title' THEN o.title"
          " WHEN 'summary' THEN o.summary ELSE o.content END AS t) AS f")

# One page of an entity's mentions in live rows, in (object, row, field, start, end) order: the
# key the cursor carries, so a page starts after the last one shown whatever was written since.
_MENTIONS = f"""
SELECT coalesce(o.parent_id, o.id), r.title, m.row_id, m.field, m.start_pos, m.end_pos, m.text,
       {_WINDOW}
FROM mentions m JOIN objects o ON o.id = m.row_id
JOIN objects r ON r.id = coalesce(o.parent_id, o.id) AND r.deleted_at IS NULL
{_FIELD}
WHERE m.namespace_id = %(ns)s AND m.entity_id = %(id)s AND o.deleted_at IS NULL
  AND (%(after)s IS FALSE OR (coalesce(o.parent_id, o.id), m.row_id, m.field, m.start_pos,
                              m.end_pos) > (%(k0)s::uuid, %(k1)s::uuid, %(k2)s::text,
                                            %(k3)s::int, %(k4)s::int))
ORDER BY coalesce(o.parent_id, o.id), m.row_id, m.field, m.start_pos, m.end_pos
LIMIT %(limit)s"""

# A few mentions of each entity (a pair's contexts), one statement for a page of pairs.
_CONTEXTS = f"""
SELECT entity_id, object_id, title, row_id, field, start_pos, end_pos, text, wstart, win, flen
FROM (SELECT m.entity_id, coalesce(o.parent_id, o.id) AS object_id, r.title, m.row_id,
             m.field, m.start_pos, m.end_pos, m.text, {_WINDOW},
             row_number() OVER (PARTITION BY m.entity_id
                                ORDER BY coalesce(o.parent_id, o.id), m.row_id, m.field,
                                         m.start_pos) AS n
      FROM mentions m JOIN objects o ON o.id = m.row_id
      JOIN objects r ON r.id = coalesce(o.parent_id, o.id) AND r.deleted_at IS NULL
      {_FIELD}
      WHERE m.namespace_id = %(ns)s AND m.entity_id = ANY(%(ids)s::uuid[])
        AND o.deleted_at IS NULL) AS x
WHERE n <= %(n)s ORDER BY entity_id, n"""

# The pairs of one status, most confident first (then by ids), after the cursor's pair; both
# entities live (a pair with a merged end is one entity already).
_PAIRS = """
SELECT ee.from_id, ee.to_id, ee.status, ee.confidence::float8, ee.method,
       coalesce(ee.confidence, 0)::float8, ee.updated_at
FROM entity_edges ee
JOIN entities a ON a.id = ee.from_id AND a.merged_into IS NULL AND a.part_count > 0
JOIN entities b ON b.id = ee.to_id AND b.merged_into IS NULL AND b.part_count > 0
WHERE ee.namespace_id = %(ns)s AND ee.edge_type = 'POSSIBLY_SAME' AND ee.status = %(status)s
  AND (%(after)s IS FALSE OR coalesce(ee.confidence, 0) < %(c)s::float8::real
       OR (coalesce(ee.confidence, 0) = %(c)s::float8::real
           AND (ee.from_id, ee.to_id) > (%(f)s::uuid, %(t)s::uuid)))
ORDER BY coalesce(ee.confidence, 0) DESC, ee.from_id, ee.to_id
LIMIT %(limit)s"""

_ENTITIES = """
SELECT id, name, label, part_count FROM entities
WHERE namespace_id = %(ns)s AND id = ANY(%(ids)s::uuid[])"""

_ALIASES = """
SELECT entity_id, alias FROM (
    SELECT entity_id, alias, row_number() OVER (PARTITION BY entity_id
                                                ORDER BY created_at, norm) AS n
    FROM entity_aliases WHERE namespace_id = %(ns)s AND entity_id = ANY(%(ids)s::uuid[])) AS x
WHERE n <= %(n)s ORDER BY entity_id, n"""

# Every live entity joined to each of `ids` (the summed weight of the edges between them).
_ADJACENT = f"""
SELECT x.id, x.other, sum(x.weight)::float8 FROM (
    SELECT ee.from_id AS id, ee.to_id AS other, ee.weight FROM entity_edges ee
    WHERE ee.from_id = ANY(%(ids)s::uuid[]) AND ee.namespace_id = %(ns)s AND {_JOINS}
    UNION ALL
    SELECT ee.to_id, ee.from_id, ee.weight FROM entity_edges ee
    WHERE ee.to_id = ANY(%(ids)s::uuid[]) AND ee.namespace_id = %(ns)s AND {_JOINS}) AS x
JOIN entities e ON e.id = x.other AND e.merged_into IS NULL AND e.part_count > 0
GROUP BY x.id, x.other"""


@dataclass(frozen=True)
class Profile:
    """What an entity's live mentions say: how many, in how many objects, under which labels."""

    mention_count: int
    object_count: int
    labels: list[tuple[str, int]]


@dataclass(frozen=True)
class Neighbour:
    """An entity joined to another by one edge (`outgoing`: the edge as stored starts at the
    entity asked about; matters for RELATES)."""

    entity_id: uuid.UUID
    name: str
    label: str
    edge_type: str
    predicate: str | None
    weight: float
    outgoing: bool


@dataclass(frozen=True)
class Mention:
    """A mention in a live row, with its object and the snippet around it."""

    object_id: uuid.UUID
    title: str | None
    row_id: uuid.UUID
    field: str
    start: int
    end: int
    text: str
    snippet: Snippet

    @property
    def key(self) -> tuple[uuid.UUID, uuid.UUID, str, int, int]:
        """Its place in the order mentions are paged in (what a cursor carries)."""
        return (self.object_id, self.row_id, self.field, self.start, self.end)


MENTION_KEY = (uuid.UUID, uuid.UUID, str, int, int)


@dataclass(frozen=True)
class PairEnd:
    """One entity of a pair, as the curator sees it."""

    id: uuid.UUID
    name: str
    label: str
    part_count: int
    aliases: list[str]
    contexts: list[Mention]


@dataclass(frozen=True)
class Pair:
    """A POSSIBLY_SAME pair with its evidence. `key` is its place in the queue's order."""

    from_end: PairEnd
    to_end: PairEnd
    status: str
    confidence: float | None
    method: str | None
    updated_at: Any
    shared: list[tuple[uuid.UUID, str, str, float]]  # (id, name, label, weight)
    key: tuple[float, uuid.UUID, uuid.UUID]


PAIR_KEY = (float, uuid.UUID, uuid.UUID)


def profile(namespace: uuid.UUID, entity_id: uuid.UUID) -> Plan[Profile]:
    """Mentions, objects and labels of an entity in live rows."""
    rows = yield Statement(_PROFILE, {"ns": namespace, "id": entity_id})
    mentions, objects, labels, counts = rows[0]
    return Profile(int(mentions), int(objects),
                   [(str(label), int(n)) for label, n in zip(labels, counts, strict=True)])


def neighbours(namespace: uuid.UUID, entity_id: uuid.UUID, limit: int) -> Plan[list[Neighbour]]:
    """The `limit` strongest edges to live entities (CO_OCCURS, RELATES, verified pairs)."""
    rows = yield Statement(_NEIGHBOURS, {"ns": namespace, "id": entity_id, "n": limit})
    return [Neighbour(r[0], r[1], r[2], r[3], r[4] or None, float(r[5]), bool(r[6]))
            for r in rows]


def _mention(r: Sequence[Any]) -> Mention:
    object_id, title, row_id, field, start, end, text, wstart, window, flen = r
    return Mention(object_id, title, row_id, field, int(start), int(end), text,
                   snippet(window or "", int(wstart), int(flen), int(start), int(end)))


def mentions(namespace: uuid.UUID, entity_id: uuid.UUID, limit: int,
             after: tuple[Any, ...] | None) -> Plan[list[Mention]]:
    """Up to `limit` mentions in live rows after the key `after` (None: from the first)."""
    k = after or (None,) * 5
    rows = yield Statement(_MENTIONS, {
        "ns": namespace, "id": entity_id, "limit": limit, "ctx": SNIPPET_CONTEXT,
        "after": after is not None, "k0": k[0], "k1": k[1], "k2": k[2], "k3": k[3],
        "k4": k[4]})
    return [_mention(r) for r in rows]


def pairs(namespace: uuid.UUID, status: str, limit: int, after: tuple[Any, ...] | None, *,
          aliases: int, contexts: int, shared: int) -> Plan[list[Pair]]:
    """Up to `limit` POSSIBLY_SAME pairs of `status` after the key `after`, each with both
    entities (name, label, part count, up to `aliases` aliases and `contexts` mentions) and
    up to `shared` neighbours both are joined to (the weaker of the two joins first)."""
    c, f, t = after or (0.0, None, None)
    found = yield Statement(_PAIRS, {"ns": namespace, "status": status, "limit": limit,
                                     "after": after is not None, "c": c, "f": f, "t": t})
    if not found:
        return []
    ids = sorted({r[0] for r in found} | {r[1] for r in found})
    keys = {"ns": namespace, "ids": ids}
    ents = {r[0]: r for r in (yield Statement(_ENTITIES, keys))}
    names: dict[uuid.UUID, list[str]] = {}
    for entity_id, alias in (yield Statement(_ALIASES, {**keys, "n": aliases})):
        names.setdefault(entity_id, []).append(alias)
    seen: dict[uuid.UUID, list[Mention]] = {}
    for r in (yield Statement(_CONTEXTS, {**keys, "n": contexts, "ctx": SNIPPET_CONTEXT})):
        seen.setdefault(r[0], []).append(_mention(r[1:]))
    adjacent: dict[uuid.UUID, dict[uuid.UUID, float]] = {}
    for entity_id, other, weight in (yield Statement(_ADJACENT, keys)):
        adjacent.setdefault(entity_id, {})[other] = float(weight)
    both: dict[tuple[uuid.UUID, uuid.UUID], list[tuple[uuid.UUID, float]]] = {}
    for a, b, *_ in found:
        left, right = adjacent.get(a, {}), adjacent.get(b, {})
        common = [(o, min(left[o], right[o])) for o in left.keys() & right.keys()
                  if o not in (a, b)]
        both[(a, b)] = sorted(common, key=lambda x: (-x[1], str(x[0])))[:shared]
    wanted = sorted({o for common in both.values() for o, _ in common} - set(ents))
    if wanted:
        more = yield Statement(_ENTITIES, {"ns": namespace, "ids": wanted})
        ents.update({r[0]: r for r in more})

    def end(entity_id: uuid.UUID) -> PairEnd:
        _, name, label, part_count = ents[entity_id]
        return PairEnd(entity_id, name, label, int(part_count), names.get(entity_id, []),
                       seen.get(entity_id, []))

    return [Pair(end(a), end(b), status, confidence, method, updated,
                 [(o, ents[o][1], ents[o][2], w) for o, w in both[(a, b)]], (key, a, b))
            for a, b, status, confidence, method, key, updated in found]


# merged_into followed at most this far (a merge re-points earlier ones: 1 hop is the rule)
MAX_MERGE_HOPS = 10


def survivor(namespace: uuid.UUID, entity_id: uuid.UUID) -> Plan[EntityRecord | None]:
    """The entity `entity_id` names now: itself, or the one it was merged into; None when the
    namespace has no such entity."""
    current = entity_id
    for _ in range(MAX_MERGE_HOPS + 1):
        found = (yield from resolution.entities(namespace, [current])).get(current)
        if found is None or found.merged_into is None:
            return found
        current = found.merged_into
    return found


_NAMESPACES = """
SELECT DISTINCT namespace_id FROM entity_edges
WHERE edge_type = 'POSSIBLY_SAME' AND status = %s ORDER BY namespace_id"""


def namespaces_with(status: str) -> Plan[list[uuid.UUID]]:
    """The namespaces that have POSSIBLY_SAME pairs of `status` (an operator's review of all)."""
    rows = yield Statement(_NAMESPACES, (status,))
    return [r[0] for r in rows]
