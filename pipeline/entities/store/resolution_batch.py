"""The proposal pass's reads, one statement per batch of entities (not per entity): their rows,
the candidate rows of every entity's name (the same branches, order and limit as
`pipeline/entities/store/resolution.py: candidates` answers for one phrase), the nearest names
by embedding of every entity that has one (a LATERAL kNN on the HNSW index, the entity's own
vector read on the server: it never travels to the worker and back), and the POSSIBLY_SAME
status of many pairs. Plans (`pipeline/postgres/plans.py`).

Per entity the pass sent seven statements (its row, the trigram threshold, the lookup, its
vector, the HNSW settings, the kNN, a pair status per proposal), each planned on its own; the
lookup's UNION of eight branches cost more to plan than to run, and its alias-trigram branch was
planned as a sequential scan of the namespace's aliases when the phrase had many trigrams.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from psycopg.types.json import Jsonb

from pipeline.domain.resolution import CandidateRow
from pipeline.entities.store.resolution import HNSW_EF_SEARCH_MIN, Lookup
from pipeline.postgres.plans import Plan, Statement

_SETTINGS = ("SELECT set_config('pg_trgm.similarity_threshold', %s, true),"
             " set_config('hnsw.iterative_scan', 'relaxed_order', true),"
             " set_config('hnsw.ef_search', %s, true)")

_RECORDS = """
SELECT id, namespace_id, name, label, part_count, merged_into,
       EXISTS (SELECT 1 FROM entity_name_vectors v WHERE v.entity_id = e.id)
FROM entities e WHERE id = ANY(%s::uuid[])"""

# The per-phrase lookup of resolution.py as a LATERAL over the batch: every branch reads the
# phrase's terms from `q`, and a branch a phrase does not have (a folded form equal to the
# normalised one, no acronym) is gated off per row. Keys travel as one JSON array per phrase
# (an SQL array of arrays must be rectangular). An alias's entity is read by its key (`OFFSET 0`
# keeps the planner from joining the two tables another way): with `entities` narrow (migration
# 0041) and a namespace's first load small, the planner hashed the whole table for every phrase
# of the batch instead (2,568 rows read 200 times a statement; the statement took twice as long).
_ALIAS_ENTITY = """entity_aliases a
         CROSS JOIN LATERAL (SELECT * FROM entities x WHERE x.id = a.entity_id OFFSET 0) e"""
_CANDIDATES = f"""
WITH q AS (
    SELECT t.i, t.ns, t.q, t.f, t.prefix, t.acronym,
           ARRAY(SELECT jsonb_array_elements_text(t.keys)) AS keys
    FROM unnest(%(i)s::int[], %(ns)s::uuid[], %(q)s::text[], %(f)s::text[], %(prefix)s::text[],
                %(acronym)s::text[], %(keys)s::jsonb[])
         AS t(i, ns, q, f, prefix, acronym, keys))
SELECT q.i, c.id, c.name, c.label, c.part_count, c.matched, c.via, c.sim::float8, c.source
FROM q CROSS JOIN LATERAL (
    SELECT * FROM (
        (SELECT e.id, e.name, e.label, e.part_count, e.name AS matched, 'name' AS via,
                similarity(e.norm, q.q) AS sim, NULL::text AS source, e.norm = ANY(q.keys) AS key
         FROM entities e WHERE e.namespace_id = q.ns AND e.merged_into IS NULL
           AND e.norm = ANY(q.keys))
        UNION ALL
        (SELECT e.id, e.name, e.label, e.part_count, a.alias, 'alias', similarity(a.norm, q.q),
                a.source, a.norm = ANY(q.keys)
         FROM {_ALIAS_ENTITY}
         WHERE a.namespace_id = q.ns AND e.merged_into IS NULL AND a.norm = ANY(q.keys))
        UNION ALL
        (SELECT e.id, e.name, e.label, e.part_count, e.name, 'name', similarity(e.norm, q.q),
                NULL, e.norm = ANY(q.keys)
         FROM entities e WHERE e.namespace_id = q.ns AND e.merged_into IS NULL
           AND e.norm %% q.q)
        UNION ALL
        (SELECT e.id, e.name, e.label, e.part_count, a.alias, 'alias', similarity(a.norm, q.q),
                a.source, a.norm = ANY(q.keys)
         FROM {_ALIAS_ENTITY}
         WHERE a.namespace_id = q.ns AND e.merged_into IS NULL AND a.norm %% q.q)
        UNION ALL
        (SELECT e.id, e.name, e.label, e.part_count, e.name, 'name', similarity(e.norm, q.q),
                NULL, e.norm = ANY(q.keys)
         FROM entities e WHERE q.f <> '' AND q.f <> q.q AND e.namespace_id = q.ns
           AND e.merged_into IS NULL AND e.norm %% q.f)
        UNION ALL
        (SELECT e.id, e.name, e.label, e.part_count, a.alias, 'alias', similarity(a.norm, q.q),
                a.source, a.norm = ANY(q.keys)
         FROM {_ALIAS_ENTITY}
         WHERE q.f <> '' AND q.f <> q.q AND a.namespace_id = q.ns AND e.merged_into IS NULL
           AND a.norm %% q.f)
        UNION ALL
        (SELECT e.id, e.name, e.label, e.part_count, e.name, 'name', similarity(e.norm, q.q),
                NULL, e.norm = ANY(q.keys)
         FROM entities e WHERE e.namespace_id = q.ns AND e.merged_into IS NULL
           AND e.norm LIKE q.prefix)
        UNION ALL
        (SELECT e.id, e.name, e.label, e.part_count, e.name, 'name', similarity(e.norm, q.q),
                NULL, e.norm = ANY(q.keys)
         FROM entities e WHERE q.f <> '' AND e.namespace_id = q.ns AND e.merged_into IS NULL
           AND brainstream_name_fold(e.norm) = q.f)
        UNION ALL
        (SELECT e.id, e.name, e.label, e.part_count, e.name, 'name', similarity(e.norm, q.q),
                NULL, e.norm = ANY(q.keys)
         FROM entities e WHERE q.acronym IS NOT NULL AND e.namespace_id = q.ns
           AND e.merged_into IS NULL AND e.norm LIKE '%% %%'
           AND (brainstream_initials(e.norm, true) = q.acronym
                OR brainstream_initials(e.norm, false) = q.acronym))
    ) AS hits
    ORDER BY hits.key DESC, hits.sim DESC, hits.part_count DESC, hits.id LIMIT %(limit)s) c"""

# Each entity's nearest live names by embedding, its own vector read here (HNSW, iterative
# scan: the namespace filter must not starve it).
_NEAREST = """
SELECT q.i, n.id, n.name, n.label, n.part_count, n.sim
FROM unnest(%(ids)s::uuid[]) WITH ORDINALITY AS q(id, i)
JOIN entity_name_vectors s ON s.entity_id = q.id
CROSS JOIN LATERAL (
    SELECT e.id, e.name, e.label, e.part_count,
           (1 - (v.embedding <=> s.embedding))::float8 AS sim
    FROM entity_name_vectors v JOIN entities e ON e.id = v.entity_id
    WHERE v.namespace_id = s.namespace_id AND e.merged_into IS NULL AND v.entity_id <> s.entity_id
    ORDER BY v.embedding <=> s.embedding LIMIT %(k)s) n"""
# Sent unprepared: the generic plan Postgres kept after a few batches sorted the namespace's
# every vector for each entity instead of asking the HNSW index (5 ms an entity, against
# 0.2-0.5 ms: the proposal pass's costliest statement in bench.ingest, 6-10 s of a burst).

_PAIR_STATUSES = """
SELECT d.from_id, d.to_id, d.status FROM entity_edges d
JOIN unnest(%s::uuid[], %s::uuid[], %s::uuid[]) AS p(ns, a, b)
  ON d.from_id = p.a AND d.to_id = p.b AND d.namespace_id = p.ns
WHERE d.edge_type = 'POSSIBLY_SAME' AND d.predicate = ''"""


@dataclass(frozen=True)
class PassEntity:
    """An entity the proposal pass examines: its row as the batch read it."""

    id: uuid.UUID
    namespace_id: uuid.UUID
    name: str
    label: str
    part_count: int
    merged_into: uuid.UUID | None
    has_embedding: bool


@dataclass(frozen=True)
class Looked:
    """What the batch lookup found for one entity: its candidate rows (names and aliases, then
    the nearest names by embedding), and whether the name lookup filled its limit (rows past
    it were cut, so a change anywhere in the namespace may change them)."""

    rows: list[CandidateRow]
    truncated: bool


def settings(trigram_threshold: float, k: int) -> Plan[None]:
    """The lookup's trigram threshold and the kNN's HNSW search settings, for the transaction
    (the same values the one-phrase reads set)."""
    yield Statement(_SETTINGS, (str(trigram_threshold), str(max(HNSW_EF_SEARCH_MIN, k * 4))))


def records(ids: Sequence[uuid.UUID]) -> Plan[dict[uuid.UUID, PassEntity]]:
    """The entity rows of `ids`, any namespace (merged ones too)."""
    if not ids:
        return {}
    rows = yield Statement(_RECORDS, (list(ids),))
    return {r[0]: PassEntity(r[0], r[1], r[2], r[3], int(r[4]), r[5], bool(r[6]))
            for r in rows}


def look_up(entities: Sequence[PassEntity], lookups: Sequence[Lookup], *, limit: int,
            k: int) -> Plan[dict[uuid.UUID, Looked]]:
    """Per entity, the candidate rows of its lookup (at most `limit`, best keys and similarities
    first, as `resolution.candidates`) followed by its `k` nearest live names by embedding
    (itself excluded) when it has one. Two statements for the whole batch."""
    if not entities:
        return {}
    found: dict[int, list[CandidateRow]] = {i: [] for i in range(len(entities))}
    rows = yield Statement(_CANDIDATES, {
        "i": list(range(len(entities))), "ns": [e.namespace_id for e in entities],
        "q": [lk.norm for lk in lookups], "f": [lk.folded for lk in lookups],
        "prefix": [lk.prefix for lk in lookups], "acronym": [lk.acronym for lk in lookups],
        "keys": [Jsonb(lk.keys) for lk in lookups], "limit": limit})
    for r in rows:
        found[r[0]].append(CandidateRow(r[1], r[2], r[3], int(r[4]), r[5], r[6],
                                        float(r[7] or 0.0), r[8]))
    truncated = {i for i, got in found.items() if len(got) >= limit}
    embedded = [i for i, e in enumerate(entities) if e.has_embedding]
    if embedded:
        near = yield Statement(_NEAREST, {"ids": [entities[i].id for i in embedded], "k": k},
                               prepare=False)
        for r in near:
            found[embedded[r[0] - 1]].append(
                CandidateRow(r[1], r[2], r[3], int(r[4]), r[2], "embedding",
                             max(0.0, float(r[5]))))
    return {e.id: Looked(found[i], i in truncated) for i, e in enumerate(entities)}


def pair_statuses(pairs: Mapping[tuple[uuid.UUID, uuid.UUID], uuid.UUID]
                  ) -> Plan[dict[tuple[uuid.UUID, uuid.UUID], str]]:
    """The POSSIBLY_SAME status of each stored pair ((from_id, to_id) as stored -> namespace);
    pairs never proposed are absent."""
    if not pairs:
        return {}
    keys = list(pairs)
    rows = yield Statement(_PAIR_STATUSES, ([pairs[p] for p in keys], [p[0] for p in keys],
                                            [p[1] for p in keys]))
    return {(r[0], r[1]): str(r[2]) for r in rows}
