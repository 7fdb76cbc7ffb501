"""The writes of entity resolution: merging one entity into another (or saying what a merge
would change), and the POSSIBLY_SAME pairs with their status. Plans
(`pipeline/postgres/plans.py`), one transaction each.

A merge moves everything that hangs on the merged entity to the survivor: mentions, aliases
(its own name becomes one, source `merge`), entity edges (re-keyed; the weights of an edge both
had are summed, its evidence joined; an edge between the two is dropped), recomputes the
survivor's `part_count`, sets `merged_into` (also on entities merged into the merged one
before, so following it is one step) and records the merge in `entity_merges`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.domain.errors import EntityMerged, InvalidInput, NotFound
from pipeline.postgres.plans import Plan, Statement

_LOCK = """
SELECT id, name, norm, merged_into FROM entities
WHERE (namespace_id = %s) IS TRUE AND id = ANY(%s::uuid[]) ORDER BY id FOR UPDATE"""

_WHAT_MOVES = """
SELECT (SELECT count(*) FROM mentions WHERE entity_id = %(f)s),
       (SELECT count(*) FROM entity_aliases WHERE entity_id = %(f)s),
       (SELECT count(*) FROM entity_edges WHERE (from_id = %(f)s OR to_id = %(f)s)
           AND from_id <> %(i)s AND to_id <> %(i)s),
       (SELECT count(*) FROM entity_edges WHERE (from_id = %(f)s AND to_id = %(i)s)
           OR (from_id = %(i)s AND to_id = %(f)s)),
       ARRAY(SELECT DISTINCT coalesce(o.parent_id, o.id) FROM mentions m
             JOIN objects o ON o.id = m.row_id WHERE m.entity_id = %(f)s)"""

_MOVE_MENTIONS = "UPDATE mentions SET entity_id = %(i)s WHERE entity_id = %(f)s"
# The facts stated about the merged entity are the survivor's (migration 0053); their history
# (times) is kept, only the entity they name changes.
_MOVE_FACTS = """
UPDATE entity_facts SET subject_id = CASE WHEN subject_id = %(f)s THEN %(i)s ELSE subject_id END,
                        object_id = CASE WHEN object_id = %(f)s THEN %(i)s ELSE object_id END
WHERE namespace_id = %(ns)s AND (subject_id = %(f)s OR object_id = %(f)s)"""
# A conversation's mentions (migration 0055) move with the documents'.
_MOVE_MESSAGE_MENTIONS = ("UPDATE message_mentions SET entity_id = %(i)s"
                          " WHERE entity_id = %(f)s")

_MOVE_ALIASES = """
WITH gone AS (DELETE FROM entity_aliases WHERE entity_id = %(f)s RETURNING *)
INSERT INTO entity_aliases (namespace_id, norm, alias, entity_id, source, created_at)
SELECT namespace_id, norm, alias, %(i)s, source, created_at FROM gone
ON CONFLICT (namespace_id, norm, entity_id) DO NOTHING"""

_NAME_AS_ALIAS = """
INSERT INTO entity_aliases (namespace_id, norm, alias, entity_id, source)
VALUES (%(ns)s, %(norm)s, %(name)s, %(i)s, 'merge')
ON CONFLICT (namespace_id, norm, entity_id) DO UPDATE SET source = 'merge'"""

# Re-key the merged entity's edges onto the survivor. Symmetric types stay stored once per
# pair (from_id < to_id); a refused POSSIBLY_SAME outranks a verified one, which outranks held.
_MOVE_EDGES = """
WITH gone AS (DELETE FROM entity_edges WHERE from_id = %(f)s OR to_id = %(f)s RETURNING *),
moved AS (
    SELECT namespace_id, edge_type, predicate, weight, status, confidence, method, evidence,
           created_at,
           CASE WHEN from_id = %(f)s THEN %(i)s::uuid ELSE from_id END AS a,
           CASE WHEN to_id = %(f)s THEN %(i)s::uuid ELSE to_id END AS b
    FROM gone)
INSERT INTO entity_edges (namespace_id, from_id, to_id, edge_type, predicate, weight, status,
                          confidence, method, evidence, created_at)
SELECT namespace_id,
       CASE WHEN edge_type <> 'RELATES' AND b < a THEN b ELSE a END,
       CASE WHEN edge_type <> 'RELATES' AND b < a THEN a ELSE b END,
       edge_type, predicate, weight, status, confidence, method, evidence, created_at
FROM moved WHERE a <> b
ON CONFLICT (from_id, edge_type, predicate, to_id) DO UPDATE SET
    weight = entity_edges.weight + EXCLUDED.weight,
    evidence = ARRAY(SELECT DISTINCT x FROM unnest(entity_edges.evidence || EXCLUDED.evidence)
                     AS x),
    confidence = greatest(entity_edges.confidence, EXCLUDED.confidence),
    status = CASE WHEN 'refused' IN (entity_edges.status, EXCLUDED.status) THEN 'refused'
                  WHEN 'verified' IN (entity_edges.status, EXCLUDED.status) THEN 'verified'
                  ELSE entity_edges.status END,
    updated_at = now()"""

# `part_count`: the live rows that mention it (what the extraction stage keeps).
_RECOUNT = """
UPDATE entities SET part_count = (
    SELECT count(DISTINCT m.row_id) FROM mentions m
    JOIN objects o ON o.id = m.row_id AND o.deleted_at IS NULL WHERE m.entity_id = %(i)s),
    updated_at = now()
WHERE id = %(i)s RETURNING part_count"""

_RETIRE = """
UPDATE entities SET merged_into = %(i)s, part_count = 0, updated_at = now()
WHERE id = %(f)s OR merged_into = %(f)s"""

_HISTORY = """
INSERT INTO entity_merges (namespace_id, from_id, into_id, confidence, method, decided_by, note)
VALUES (%(ns)s, %(f)s, %(i)s, %(c)s, %(m)s, %(by)s, %(note)s) RETURNING id"""

_PAIR_STATUS = """
SELECT status FROM entity_edges WHERE namespace_id = %s AND from_id = %s AND to_id = %s
AND edge_type = 'POSSIBLY_SAME' AND predicate = ''"""

# A held proposal is refreshed (a deferred one too, keeping its status: a curator put it off,
# the resolver's confidence still describes it); a decided one (verified, refused) is left as
# the person left it.
_HOLD = """
INSERT INTO entity_edges (namespace_id, from_id, to_id, edge_type, weight, status, confidence,
                          method)
VALUES (%(ns)s, %(a)s, %(b)s, 'POSSIBLY_SAME', %(c)s, 'held', %(c)s, %(m)s)
ON CONFLICT (from_id, edge_type, predicate, to_id) DO UPDATE SET
    confidence = EXCLUDED.confidence, weight = EXCLUDED.weight, method = EXCLUDED.method,
    updated_at = now()
WHERE entity_edges.status IN ('held', 'deferred')
RETURNING status"""

_HOLD_MANY = """
INSERT INTO entity_edges (namespace_id, from_id, to_id, edge_type, weight, status, confidence,
                          method)
SELECT ns, a, b, 'POSSIBLY_SAME', c, 'held', c, m
FROM unnest(%(ns)s::uuid[], %(a)s::uuid[], %(b)s::uuid[], %(c)s::float8[], %(m)s::text[])
     AS h(ns, a, b, c, m)
ORDER BY a, b
ON CONFLICT (from_id, edge_type, predicate, to_id) DO UPDATE SET
    confidence = EXCLUDED.confidence, weight = EXCLUDED.weight, method = EXCLUDED.method,
    updated_at = now()
WHERE entity_edges.status IN ('held', 'deferred')
RETURNING from_id, to_id"""

_DECIDE = """
INSERT INTO entity_edges (namespace_id, from_id, to_id, edge_type, weight, status, confidence,
                          method)
VALUES (%(ns)s, %(a)s, %(b)s, 'POSSIBLY_SAME', 0, %(s)s, NULL, 'person')
ON CONFLICT (from_id, edge_type, predicate, to_id) DO UPDATE SET
    status = EXCLUDED.status, updated_at = now()
RETURNING confidence, method"""

# A curator puts a pair off: undecided still, out of the held queue. Deferring a pair never
# proposed (a replay applies decisions before its proposal pass, which then fills in its
# confidence) records it; a decided pair (verified, refused) stays decided.
_DEFER = """
INSERT INTO entity_edges (namespace_id, from_id, to_id, edge_type, weight, status, confidence,
                          method)
VALUES (%(ns)s, %(a)s, %(b)s, 'POSSIBLY_SAME', 0, 'deferred', NULL, 'person')
ON CONFLICT (from_id, edge_type, predicate, to_id) DO UPDATE SET
    status = 'deferred', updated_at = now()
WHERE entity_edges.status IN ('held', 'deferred')"""


@dataclass(frozen=True)
class MergeReport:
    """What a merge changed (or, dry run, would change)."""

    from_id: uuid.UUID
    into_id: uuid.UUID
    dry_run: bool
    mentions: int
    aliases: int  # the merged entity's aliases, its name not counted
    edges_moved: int
    edges_dropped: int  # edges between the two
    objects: list[uuid.UUID]  # whose MENTIONS change
    merge_id: int | None = None
    part_count: int | None = None  # the survivor's, after the merge


@dataclass(frozen=True)
class Hold:
    """A pair the proposal pass holds as possibly the same."""

    namespace: uuid.UUID
    a: uuid.UUID
    b: uuid.UUID
    confidence: float
    method: str


def ordered(a: uuid.UUID, b: uuid.UUID) -> tuple[uuid.UUID, uuid.UUID]:
    """A symmetric pair as stored (from_id < to_id, Postgres' uuid order)."""
    return (a, b) if a.bytes < b.bytes else (b, a)


def merge(namespace: uuid.UUID, from_id: uuid.UUID, into_id: uuid.UUID, *, confidence: float,
          method: str, decided_by: str, dry_run: bool,
          note: str | None = None) -> Plan[MergeReport]:
    """Merge `from_id` into `into_id` (both live, in the namespace), or with `dry_run` only
    report what would move."""
    if from_id == into_id:
        raise InvalidInput("an entity cannot be merged into itself", field="into")
    locked = yield Statement(_LOCK, (namespace, [from_id, into_id]))
    found = {row[0]: row for row in locked}
    for field, entity_id in (("from", from_id), ("into", into_id)):
        if entity_id not in found:
            raise NotFound(f"no entity {entity_id} in this namespace", field=field)
        if found[entity_id][3] is not None:
            raise EntityMerged(f"entity {entity_id} was merged into {found[entity_id][3]}",
                               field=field)
    keys = {"f": from_id, "i": into_id, "ns": namespace}
    counts = yield Statement(_WHAT_MOVES, keys)
    mentions, aliases, moved, dropped, objects = counts[0]
    report = MergeReport(from_id, into_id, dry_run, int(mentions), int(aliases), int(moved),
                         int(dropped), list(objects))
    if dry_run:
        return report
    _, name, norm, _ = found[from_id]
    yield Statement(_MOVE_MENTIONS, keys)
    yield Statement(_MOVE_MESSAGE_MENTIONS, keys)
    yield Statement(_MOVE_ALIASES, keys)
    yield Statement(_NAME_AS_ALIAS, {**keys, "name": name, "norm": norm})
    yield Statement(_MOVE_EDGES, keys)
    yield Statement(_MOVE_FACTS, keys)
    recount = yield Statement(_RECOUNT, keys)
    yield Statement(_RETIRE, keys)
    history = yield Statement(_HISTORY, {**keys, "c": confidence, "m": method, "by": decided_by,
                                         "note": note})
    return MergeReport(from_id, into_id, False, report.mentions, report.aliases,
                       report.edges_moved, report.edges_dropped, report.objects,
                       int(history[0][0]), int(recount[0][0]))


def pair_status(namespace: uuid.UUID, a: uuid.UUID, b: uuid.UUID) -> Plan[str | None]:
    """The POSSIBLY_SAME status of a pair (held, verified, refused), None when never proposed."""
    low, high = ordered(a, b)
    rows = yield Statement(_PAIR_STATUS, (namespace, low, high))
    return str(rows[0][0]) if rows else None


def hold(namespace: uuid.UUID, a: uuid.UUID, b: uuid.UUID, *, confidence: float,
         method: str) -> Plan[bool]:
    """Propose a pair as possibly the same (status held); False when a person already decided
    it (verified or refused), which is left alone."""
    low, high = ordered(a, b)
    rows = yield Statement(_HOLD, {"ns": namespace, "a": low, "b": high, "c": confidence,
                                   "m": method})
    return bool(rows)


def hold_many(holds: Sequence[Hold]) -> Plan[set[tuple[uuid.UUID, uuid.UUID]]]:
    """`hold` for many pairs in one statement (the proposal pass's batch), in their order: a
    pair proposed twice keeps its last confidence and method, as two holds in turn would. The
    pairs (as stored) whose hold applied."""
    last: dict[tuple[uuid.UUID, uuid.UUID], Hold] = {}
    for h in holds:
        last[ordered(h.a, h.b)] = h
    if not last:
        return set()
    pairs = list(last)
    rows = yield Statement(_HOLD_MANY, {
        "ns": [last[p].namespace for p in pairs], "a": [p[0] for p in pairs],
        "b": [p[1] for p in pairs], "c": [last[p].confidence for p in pairs],
        "m": [last[p].method for p in pairs]})
    return {(r[0], r[1]) for r in rows}


def decide(namespace: uuid.UUID, a: uuid.UUID, b: uuid.UUID,
           status: str) -> Plan[tuple[float | None, str | None]]:
    """Record a person's decision on a pair (verified or refused), proposed or not; the
    resolver's confidence and method when it had proposed it."""
    low, high = ordered(a, b)
    rows = yield Statement(_DECIDE, {"ns": namespace, "a": low, "b": high, "s": status})
    confidence, method = rows[0]
    return (float(confidence) if confidence is not None else None, method)


def defer(namespace: uuid.UUID, a: uuid.UUID, b: uuid.UUID) -> Plan[str]:
    """Put a pair off (status deferred) unless a person decided it already; its status after."""
    low, high = ordered(a, b)
    yield Statement(_DEFER, {"ns": namespace, "a": low, "b": high})
    rows = yield Statement(_PAIR_STATUS, (namespace, low, high))
    return str(rows[0][0])


# -- the proposal pass's state (migrations 0013, 0028) -----------------------------------------

# One proposal pass at a time: its merges lock entities, and two passes would propose the same
# new pair from both ends.
_PASS_LOCK = "SELECT pg_try_advisory_xact_lock(hashtext('brainstream.entity_proposals'))"

# The queue's entities merged away before their pass: nothing left to examine.
_DROP_MERGED = """
DELETE FROM entity_proposal_queue q USING entities e
WHERE e.id = q.entity_id AND e.merged_into IS NOT NULL"""

_UNPROPOSED = """
SELECT q.namespace_id, q.entity_id FROM entity_proposal_queue q
JOIN entities e ON e.id = q.entity_id AND e.merged_into IS NULL
ORDER BY q.created_at, q.entity_id LIMIT %s"""

# The entity's own row is not written: an update would add a row version of the entity (name
# vector and all), and (before 0028) re-insert it into every index of `entities`.
_MARK_PROPOSED = "DELETE FROM entity_proposal_queue WHERE entity_id = ANY(%s::uuid[])"

# The sweep's check: one probe of the queue; no lock taken. With a delay (not NULL), also only
# once extraction has no row pending, or the queue's oldest entity has waited that long (both
# read a partial index or the small queue).
_ANY_UNPROPOSED = """
SELECT EXISTS (SELECT 1 FROM entity_proposal_queue q JOIN entities e
               ON e.id = q.entity_id AND e.merged_into IS NULL)
   AND (%(delay)s::float8 IS NULL
        OR NOT EXISTS (SELECT 1 FROM entity_extraction WHERE status = 'pending')
        OR (SELECT min(created_at) FROM entity_proposal_queue)
           <= now() - make_interval(secs => %(delay)s::float8))"""


def any_unproposed(max_delay: float | None = None) -> Plan[bool]:
    """Whether a live entity waits for the proposal pass (created by extraction and not
    examined yet, also when the worker that created it died before its pass). With
    `max_delay`, only once extraction has no row pending, or the oldest such entity has waited
    that long."""
    rows = yield Statement(_ANY_UNPROPOSED, {"delay": max_delay})
    return bool(rows[0][0])


def claim_unproposed(limit: int) -> Plan[list[tuple[uuid.UUID, uuid.UUID]]]:
    """(namespace, entity id) of up to `limit` live entities the proposal pass has not examined,
    oldest first; empty when another pass holds the lock (the caller's transaction keeps it)."""
    locked = yield Statement(_PASS_LOCK)
    if not locked[0][0]:
        return []
    yield Statement(_DROP_MERGED)
    rows = yield Statement(_UNPROPOSED, (limit,))
    return [(r[0], r[1]) for r in rows]


def mark_proposed(ids: list[uuid.UUID]) -> Plan[None]:
    """The proposal pass examined these entities: they leave its queue."""
    yield Statement(_MARK_PROPOSED, (ids,))
