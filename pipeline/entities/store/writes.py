"""The extraction stage's entity writes (pipeline/entities/stage.py): resolving names exactly,
and writing mentions, entities, aliases and entity edges back (the per-row state is in
`pipeline/entities/store/extraction.py`).

Everything that writes runs in the caller's transaction. `part_count` and co-occurrence weights
are recomputed from the mentions of live rows (never incremented), so writing the same batch
twice, or recounting a row twice, lands on the same numbers.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
import psycopg.sql

Conn = psycopg.Connection[Any]

# The write-back's arrays go as binary parameters (`%b`): psycopg dumps a list of UUIDs as text
# element by element in Python, 8x slower than binary (20,000 ids: 79 against 10 ms), and one
# batch passes tens of thousands (the CO_OCCURS pairs above all).

# The advisory-lock class of entities (pg_advisory_xact_lock(class, key)): apart from the
# one-key locks the embedding service takes on roots.
_LOCK_CLASS = 0x656E74
# Entities hash into this many lock keys: two batches that touch one entity share a key, and a
# batch never holds more than this many locks (the lock table is shared and finite).
_LOCK_BUCKETS = 1024

# The entities a row's entities resolve to once merges are followed (a chain, bounded).
_SURVIVORS = """
WITH RECURSIVE chain(start, id, depth) AS (
    SELECT s, s, 0 FROM unnest(%b::uuid[]) AS s
    UNION ALL
    SELECT c.start, e.merged_into, c.depth + 1 FROM chain c JOIN entities e ON e.id = c.id
    WHERE e.merged_into IS NOT NULL AND c.depth < 32)
SELECT DISTINCT ON (start) start, id FROM chain ORDER BY start, depth DESC
"""

# An alias's entity when several share the norm: what a person said first, then merges, then
# what extractors stated, then surface forms; ties by id, so every worker picks the same one. A
# typed key takes only an entity of its class: PERSON "Jordan" never joins GPE "Jordan" through
# the surface alias the country left.
_ALIASES = """
SELECT DISTINCT ON (q.ns, q.norm, q.cls) q.ns, q.norm, q.cls, a.entity_id
FROM entity_aliases a JOIN unnest(%b::uuid[], %b::text[], %b::text[]) AS q(ns, norm, cls)
     ON a.namespace_id = q.ns AND a.norm = q.norm
JOIN entities e ON e.id = a.entity_id AND (q.cls = '' OR e.label_class = q.cls)
ORDER BY q.ns, q.norm, q.cls,
         array_position(ARRAY['manual', 'merge', 'extractor', 'surface'], a.source), a.entity_id
"""

# The live entities of these names, every class.
_BY_NAME = """
SELECT e.namespace_id, e.norm, e.label_class, e.id FROM entities e
JOIN (SELECT DISTINCT * FROM unnest(%b::uuid[], %b::text[])) AS q(ns, norm)
  ON e.namespace_id = q.ns AND e.norm = q.norm
WHERE e.merged_into IS NULL
"""

# One statement for all the entities: their live mentioning rows counted in one grouped join
# (not a subquery per entity).
_PART_COUNT = """
UPDATE entities e SET part_count = c.n, updated_at = now()
FROM (SELECT t.id, count(DISTINCT o.id) AS n
      FROM unnest(%b::uuid[]) AS t(id)
      LEFT JOIN mentions m ON m.entity_id = t.id
      LEFT JOIN objects o ON o.id = m.row_id AND o.deleted_at IS NULL
      GROUP BY t.id) c
WHERE e.id = c.id AND e.part_count <> c.n
"""

# Weight of each touched pair: the live rows where both are among the row's counted entities
# (pipeline/entities/ids.py: counted_entities, the same ranking); pairs left with none lose
# their edge. The rows naming both are found from the rarer entity's mentions (`x`, by its
# part_count), probing the other's: a pair with a hub costs the rare side's rows, not the hub's.
# The pairs left with no row are found by a set difference (hashed), then deleted by key: an
# anti-join against `w` was planned as a nested loop over both lists (the planner cannot see a
# CTE's size) and cost most of the statement.
_COOCCURS = """
WITH p(a, b) AS (SELECT * FROM unnest(%(a)b::uuid[], %(b)b::uuid[])),
d AS (SELECT p.a, p.b,
             CASE WHEN coalesce(ea.part_count, 0) <= coalesce(eb.part_count, 0)
                  THEN p.a ELSE p.b END AS x,
             CASE WHEN coalesce(ea.part_count, 0) <= coalesce(eb.part_count, 0)
                  THEN p.b ELSE p.a END AS y
      FROM p LEFT JOIN entities ea ON ea.id = p.a LEFT JOIN entities eb ON eb.id = p.b),
c AS (SELECT DISTINCT d.a, d.b, both_.row_id FROM d CROSS JOIN LATERAL (
          SELECT mx.row_id FROM mentions mx
          WHERE mx.entity_id = d.x
            AND EXISTS (SELECT 1 FROM mentions my WHERE my.entity_id = d.y
                        AND my.row_id = mx.row_id)
            AND EXISTS (SELECT 1 FROM objects o WHERE o.id = mx.row_id
                        AND o.deleted_at IS NULL)) both_),
r AS (SELECT cr.row_id, e.entity_id,
             row_number() OVER (PARTITION BY cr.row_id ORDER BY e.n DESC, e.entity_id) AS rank
      FROM (SELECT DISTINCT row_id FROM c) cr CROSS JOIN LATERAL (
          SELECT m.entity_id, count(*) AS n FROM mentions m WHERE m.row_id = cr.row_id
          GROUP BY m.entity_id) e),
w AS (SELECT c.a, c.b, count(*) AS n, (array_agg(c.row_id ORDER BY c.row_id))[1:%(n)s] AS ev
      FROM c JOIN r ra ON ra.row_id = c.row_id AND ra.entity_id = c.a AND ra.rank <= %(cap)s
             JOIN r rb ON rb.row_id = c.row_id AND rb.entity_id = c.b AND rb.rank <= %(cap)s
      GROUP BY c.a, c.b),
up AS (INSERT INTO entity_edges (namespace_id, from_id, to_id, edge_type, weight, evidence)
       SELECT e.namespace_id, w.a, w.b, 'CO_OCCURS', w.n, coalesce(w.ev, '{}')
       FROM w JOIN entities e ON e.id = w.a ORDER BY w.a, w.b
       ON CONFLICT (from_id, edge_type, predicate, to_id) DO UPDATE
           SET weight = EXCLUDED.weight, evidence = EXCLUDED.evidence, updated_at = now()
           WHERE entity_edges.weight IS DISTINCT FROM EXCLUDED.weight
              OR entity_edges.evidence IS DISTINCT FROM EXCLUDED.evidence),
gone AS (SELECT a, b FROM p EXCEPT SELECT a, b FROM w)
DELETE FROM entity_edges d USING gone
WHERE d.from_id = gone.a AND d.edge_type = 'CO_OCCURS' AND d.predicate = '' AND d.to_id = gone.b
"""


@dataclass(frozen=True)
class NewEntity:
    id: uuid.UUID
    namespace_id: uuid.UUID
    name: str
    norm: str
    label: str
    # The rows naming it in the creating batch: with its count right at the insert, the recount
    # that follows leaves the new row alone instead of writing a second version of it (a
    # quarter of which did not fit their page and went into every index, name vectors' too).
    part_count: int = 0


@dataclass(frozen=True)
class MentionRow:
    row_id: uuid.UUID
    field: str
    start: int
    end: int
    namespace_id: uuid.UUID
    entity_id: uuid.UUID
    label: str
    text: str


def lock_entities(conn: Conn, ids: Iterable[uuid.UUID]) -> None:
    """Serialize the writers of these entities: lock keys taken in one global (sorted) order, so
    two workers cannot deadlock on them."""
    buckets = sorted({entity.int % _LOCK_BUCKETS for entity in ids})
    if buckets:
        conn.execute("SELECT pg_advisory_xact_lock(%s, b) FROM unnest(%s::int[]) AS b",
                     (_LOCK_CLASS, buckets))


# The name lookups below run unprepared (`prepare=False`): psycopg prepares a statement after
# its fifth run and Postgres may then keep a generic plan. One made while the entity tables were
# (nearly) empty joined them by scanning `entities` once per looked-up name, and stayed in use
# as they grew: the alias lookup cost 300-600 ms a batch instead of about 2 ms until autovacuum
# analyzed the table. They run a few times per batch; planning each costs about a millisecond.


def by_norm(conn: Conn, keys: Iterable[tuple[uuid.UUID, str, str]]
            ) -> dict[tuple[uuid.UUID, str, str], uuid.UUID]:
    """Exact resolution: (namespace, norm, label class) -> the live entity of that name and
    class; for an untyped key ('' class) with no untyped entity, the one typed entity of that
    name when there is exactly one (several: homonyms, no guess, no alias either); else the
    entity an alias of that norm names, of the key's class when it has one (merges followed to
    the survivor)."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    classes: dict[tuple[uuid.UUID, str], dict[str, uuid.UUID]] = {}
    for ns, norm, cls, eid in conn.execute(
            _BY_NAME, ([k[0] for k in wanted], [k[1] for k in wanted]), prepare=False
    ).fetchall():
        classes.setdefault((ns, norm), {})[cls] = eid
    found: dict[tuple[uuid.UUID, str, str], uuid.UUID] = {}
    rest = []
    for key in wanted:
        named = classes.get((key[0], key[1]), {})
        typed = [eid for cls, eid in named.items() if cls]
        if key[2] in named:
            found[key] = named[key[2]]
        elif not key[2] and len(typed) == 1:
            found[key] = typed[0]
        elif key[2] or not typed:
            rest.append(key)
    if rest:
        aliased = {(ns, norm, cls): eid for ns, norm, cls, eid in conn.execute(
            _ALIASES, ([k[0] for k in rest], [k[1] for k in rest], [k[2] for k in rest]),
            prepare=False).fetchall()}
        found.update(follow(conn, aliased))
    return found


def follow(conn: Conn, ids: Mapping[Any, uuid.UUID]) -> dict[Any, uuid.UUID]:
    """The same mapping with every entity replaced by the one it was merged into, if any."""
    if not ids:
        return {}
    survivor = dict(conn.execute(_SURVIVORS, (sorted(set(ids.values())),),
                                 prepare=False).fetchall())
    return {key: survivor.get(eid, eid) for key, eid in ids.items()}


def create_entities(conn: Conn, entities: Sequence[NewEntity]) -> None:
    """Insert entities not there yet (in id order; an id or name another writer created first
    is left as it is). One statement for the batch: the insert triggers of `entities` (the
    proposal queue, the PPR snapshot log) are statement triggers, and fired once per entity
    they cost more than the inserts themselves."""
    ordered = sorted(entities, key=lambda e: e.id)
    if not ordered:
        return
    conn.execute(
        "INSERT INTO entities (id, namespace_id, name, norm, label, part_count)"
        " SELECT id, ns, name, norm, label, n FROM unnest(%b::uuid[], %b::uuid[],"
        " %b::text[], %b::text[], %b::text[], %b::int[])"
        " WITH ORDINALITY AS t(id, ns, name, norm, label, n, i)"
        " ORDER BY i ON CONFLICT DO NOTHING",
        ([e.id for e in ordered], [e.namespace_id for e in ordered],
         [e.name for e in ordered], [e.norm for e in ordered], [e.label for e in ordered],
         [e.part_count for e in ordered]))


def mention_counts(conn: Conn, row_ids: Sequence[uuid.UUID]
                   ) -> dict[uuid.UUID, dict[uuid.UUID, int]]:
    """Per row, the entities its current mentions name and how often."""
    out: dict[uuid.UUID, dict[uuid.UUID, int]] = {}
    for row_id, entity, n in conn.execute(
            "SELECT row_id, entity_id, count(*) FROM mentions WHERE row_id = ANY(%b)"
            " GROUP BY row_id, entity_id", (list(row_ids),)).fetchall():
        out.setdefault(row_id, {})[entity] = int(n)
    return out


def replace_mentions(conn: Conn, row_ids: Sequence[uuid.UUID],
                     mentions: Sequence[MentionRow]) -> None:
    """The rows' mentions become exactly `mentions`."""
    conn.execute("DELETE FROM mentions WHERE row_id = ANY(%b)", (list(row_ids),))
    if not mentions:
        return
    with conn.cursor() as cur, cur.copy(
            "COPY mentions (row_id, field, start_pos, end_pos, namespace_id, entity_id, label,"
            " text) FROM STDIN") as copy:
        for m in mentions:
            copy.write_row((m.row_id, m.field, m.start, m.end, m.namespace_id, m.entity_id,
                            m.label, m.text))


def add_aliases(conn: Conn, aliases: Iterable[tuple[uuid.UUID, str, str, uuid.UUID, str]]
                ) -> None:
    """(namespace, norm, alias, entity, source) rows; one already there is kept as it is. One
    statement, in key order (two writers meet the same keys in the same order)."""
    rows = sorted(set(aliases))
    if rows:
        conn.execute(
            "INSERT INTO entity_aliases (namespace_id, norm, alias, entity_id, source)"
            " SELECT ns, norm, alias, eid, src FROM unnest(%b::uuid[], %b::text[], %b::text[],"
            " %b::uuid[], %b::text[]) WITH ORDINALITY AS t(ns, norm, alias, eid, src, i)"
            " ORDER BY i ON CONFLICT DO NOTHING",
            [list(column) for column in zip(*rows, strict=True)])


def recount_entities(conn: Conn, entity_ids: Iterable[uuid.UUID]) -> None:
    """Set `part_count` of these entities to the live rows that mention them."""
    ids = sorted(set(entity_ids))
    if ids:
        conn.execute(_PART_COUNT, (ids,))


def recount_pairs(conn: Conn, pairs: Iterable[tuple[uuid.UUID, uuid.UUID]], *, cap: int,
                  evidence_n: int) -> None:
    """Recompute the CO_OCCURS edge of each pair (a < b); pairs no live row names lose it."""
    ordered = sorted(set(pairs), key=lambda p: (p[0].int, p[1].int))  # UUID order, faster
    if ordered:
        conn.execute(_COOCCURS, {"a": [p[0] for p in ordered], "b": [p[1] for p in ordered],
                                 "cap": cap, "n": evidence_n})


ENTITY_TABLES = ("entities", "entity_aliases", "mentions", "entity_edges", "entity_extraction")

# Tables of which more than half the rows changed since their last ANALYZE (or that were never
# analyzed), once at least `min` rows did: their statistics no longer describe them.
_STALE = """
SELECT relname FROM pg_stat_user_tables
WHERE schemaname = current_schema() AND relname = ANY(%s)
  AND n_mod_since_analyze >= %s AND n_mod_since_analyze * 2 > n_live_tup
ORDER BY relname"""


def analyze(conn: Conn) -> None:
    """Refresh the planner's statistics of the entity tables (after a bulk load: plans chosen
    for nearly empty tables, nested loops over what became thousands of rows, stay wrong until
    autovacuum comes round)."""
    conn.execute("ANALYZE entities, entity_aliases, mentions, entity_edges, entity_extraction")


def analyze_stale(conn: Conn, tables: Sequence[str] = ENTITY_TABLES, *,
                  min_changes: int = 256) -> list[str]:
    """ANALYZE those of `tables` whose statistics are stale (see `_STALE`); the tables analyzed.

    A fresh namespace's load grows the entity tables from empty faster than autovacuum looks
    (once a minute by default, then at 10 % changed). Without statistics the planner takes
    `namespace_id = $1` for selective, and with one tenant holding every row the resolver's
    lookup then reads the whole namespace per name: 25x the CPU of the pass measured with
    statistics (bench.extract.profile). Checked after each batch, this costs one catalog read;
    the ANALYZEs come at roughly each doubling of a growing table. A table another session is
    analyzing (or vacuuming) is skipped rather than waited for. The counters are the statistics
    system's, flushed by each backend within a second or so of its commits. `conn` autocommits
    (a pool's connection): each ANALYZE commits on its own."""
    stale = [str(r[0]) for r in conn.execute(_STALE, (list(tables), min_changes)).fetchall()]
    done: list[str] = []
    for table in stale:
        try:
            with conn.transaction():
                conn.execute("SET LOCAL lock_timeout = '100ms'")
                conn.execute(psycopg.sql.SQL("ANALYZE {}").format(psycopg.sql.Identifier(table)))
            done.append(table)
        except psycopg.errors.LockNotAvailable:
            continue
    return done


def withdraw_relations(conn: Conn, namespaces: Sequence[uuid.UUID],
                       row_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Take these rows out of the evidence of the RELATES edges they stated; an edge no row
    states any more is removed. The entities whose edges changed."""
    if not row_ids:
        return set()
    changed = conn.execute(
        "UPDATE entity_edges e SET evidence = x.ev, weight = cardinality(x.ev),"
        " updated_at = now()"
        " FROM (SELECT from_id, predicate, to_id, ARRAY(SELECT v FROM unnest(evidence) AS v"
        "         WHERE v <> ALL(%(rows)s::uuid[]) ORDER BY v) AS ev"
        "       FROM entity_edges WHERE namespace_id = ANY(%(ns)s::uuid[])"
        "         AND edge_type = 'RELATES' AND evidence && %(rows)s::uuid[]) x"
        " WHERE e.from_id = x.from_id AND e.edge_type = 'RELATES'"
        "   AND e.predicate = x.predicate AND e.to_id = x.to_id"
        " RETURNING e.from_id, e.to_id",
        {"rows": list(row_ids), "ns": sorted(set(namespaces))}).fetchall()
    touched = {eid for pair in changed for eid in pair}
    if touched:
        conn.execute("DELETE FROM entity_edges WHERE edge_type = 'RELATES' AND evidence = '{}'"
                     " AND from_id = ANY(%s)", (sorted(touched),))
    return touched


def add_relations(conn: Conn, edges: Mapping[tuple[uuid.UUID, uuid.UUID, str, uuid.UUID],
                                              set[uuid.UUID]]) -> None:
    """RELATES edges: (namespace, subject, predicate, object) -> the rows that state it, added
    to its evidence; weight = the rows stating it."""
    merged = ("ARRAY(SELECT DISTINCT x FROM unnest(entity_edges.evidence || EXCLUDED.evidence)"
              " AS x ORDER BY x)")
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO entity_edges (namespace_id, from_id, to_id, edge_type, predicate,"
            " weight, evidence) VALUES (%(ns)s, %(a)s, %(b)s, 'RELATES', %(p)s,"
            " cardinality(%(ev)s::uuid[]), %(ev)s::uuid[])"
            " ON CONFLICT (from_id, edge_type, predicate, to_id) DO UPDATE"
            f" SET evidence = {merged}, weight = cardinality({merged}), updated_at = now()",
            [{"ns": ns, "a": a, "b": b, "p": p, "ev": sorted(rows)}
             for (ns, a, p, b), rows in sorted(edges.items())])


