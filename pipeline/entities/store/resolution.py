"""The resolver's reads: candidate entities of a phrase (names, aliases, trigrams, a name
prefix, an acronym's expansion: `brainstream_initials`, migration 0013), the nearest names by
embedding, mentions as evidence, and one entity with its aliases and counts. Plans
(`pipeline/postgres/plans.py`): the API runs them on its async pool, the proposal pass on
the worker's.

Only live entities (`merged_into IS NULL`) are candidates. The phrase's lookup keys are computed
by the caller (`pipeline/entities/resolving.py`), so this module knows SQL, not names.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from pipeline.domain.resolution import CandidateRow, Evidence
from pipeline.postgres.plans import Plan, Statement

_TRIGRAM_THRESHOLD = "SELECT set_config('pg_trgm.similarity_threshold', %s, true)"

# Candidates, one branch per way a name can be found, each on an index of its own (a single
# WHERE with ORs lets the planner use the namespace on one branch only): names and aliases
# equal to a key, near the phrase by trigrams, beginning with the phrase's words, folding to the
# phrase's fold, or (an acronym) whose words' initials spell it. The same entity may come from
# several branches: the resolver keeps its best.
_NAME_COLUMNS = sql.SQL(
    "SELECT e.id, e.name, e.label, e.part_count, e.name, 'name', similarity(e.norm, %(q)s),"
    " NULL::text, {key} FROM entities e WHERE e.namespace_id = %(ns)s"
    " AND e.merged_into IS NULL AND {labels} AND ")
_ALIAS_COLUMNS = sql.SQL(
    "SELECT e.id, e.name, e.label, e.part_count, a.alias, 'alias', similarity(a.norm, %(q)s),"
    " a.source, {key} FROM entity_aliases a JOIN entities e ON e.id = a.entity_id"
    " WHERE a.namespace_id = %(ns)s AND e.merged_into IS NULL AND {labels} AND ")
_BY_KEY = sql.SQL("e.norm = ANY(%(keys)s)")
_BY_TRIGRAM = sql.SQL("e.norm %% {}")
_BY_PREFIX = sql.SQL("e.norm LIKE %(prefix)s")
# the fold layer's own lookup: names that differ only in accents and letters trigrams do not
# bridge ("Łódź" / "Lodz", "Crème Brûlée" / "Creme Brulee"), on 0015's fold index
_BY_FOLD = sql.SQL("brainstream_name_fold(e.norm) = %(f)s")
_BY_INITIALS = sql.SQL(
    "e.norm LIKE '%% %%' AND (brainstream_initials(e.norm, true) = %(acronym)s"
    " OR brainstream_initials(e.norm, false) = %(acronym)s)")
_ALIAS_BY_KEY = sql.SQL("a.norm = ANY(%(keys)s)")
_ALIAS_BY_TRIGRAM = sql.SQL("a.norm %% {}")
_RANKED = sql.SQL(
    "SELECT id, name, label, part_count, matched, via, sim::float8, source FROM ({}) AS"
    " hits(id, name, label, part_count, matched, via, sim, source, key)"
    " ORDER BY key DESC, sim DESC, part_count DESC, id LIMIT %(limit)s")

# The name index is built with m 8 (migration 0038): the kNN searches wider to keep its recall
# (0.993 at 100 against 0.986 at pgvector's default 40, on 3,294 SciFact names).
HNSW_EF_SEARCH_MIN = 100
_HNSW = ("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
         " set_config('hnsw.ef_search', %s, true)")

# The vectors are in `entity_name_vectors` (migration 0041): the HNSW scan walks them in order and
# each is joined to its entity for the live and label filters.
_NEAREST = """
SELECT e.id, e.name, e.label, e.part_count, e.name, 'embedding',
       (1 - (v.embedding <=> %(v)s::vector))::float8
FROM entity_name_vectors v JOIN entities e ON e.id = v.entity_id
WHERE v.namespace_id = %(ns)s AND e.merged_into IS NULL
  AND (%(labels)s::text[] IS NULL OR e.label = ANY(%(labels)s))
ORDER BY v.embedding <=> %(v)s::vector LIMIT %(k)s"""

# A few live rows naming each entity, with the object each row belongs to.
_EVIDENCE = """
SELECT entity_id, row_id, text, object_id FROM (
    SELECT m.entity_id, m.row_id, m.text, coalesce(o.parent_id, o.id) AS object_id,
           row_number() OVER (PARTITION BY m.entity_id ORDER BY m.row_id, m.start_pos) AS n
    FROM mentions m JOIN objects o ON o.id = m.row_id AND o.deleted_at IS NULL
    WHERE m.namespace_id = %(ns)s AND m.entity_id = ANY(%(ids)s::uuid[])) AS r
WHERE n <= %(n)s ORDER BY entity_id, n"""

_ENTITY = """
SELECT id, name, norm, label, part_count, merged_into, created_at, updated_at,
       EXISTS (SELECT 1 FROM entity_name_vectors v WHERE v.entity_id = e.id)
FROM entities e WHERE (namespace_id = %s) IS TRUE AND id = ANY(%s::uuid[])"""

_ALIASES = """
SELECT alias, source FROM entity_aliases WHERE namespace_id = %s AND entity_id = %s
ORDER BY created_at, norm LIMIT %s"""

_COUNTS = """
SELECT (SELECT count(*) FROM mentions WHERE namespace_id = %(ns)s AND entity_id = %(id)s),
       (SELECT count(*) FROM entity_aliases WHERE namespace_id = %(ns)s AND entity_id = %(id)s),
       (SELECT coalesce(jsonb_object_agg(edge_type, n), '{}') FROM (
            SELECT edge_type, count(*) AS n FROM entity_edges
            WHERE namespace_id = %(ns)s AND (from_id = %(id)s OR to_id = %(id)s)
            GROUP BY edge_type) AS t)"""


@dataclass(frozen=True)
class Lookup:
    """What to look a phrase up by: its normalised and folded forms, exact keys (names and
    aliases equal to one are candidates), a LIKE pattern for names that begin with it, and the
    letters an acronym-shaped phrase spells (None: not acronym-shaped)."""

    norm: str
    folded: str
    keys: list[str]
    prefix: str
    acronym: str | None


@dataclass(frozen=True)
class EntityRecord:
    """One entity row."""

    id: uuid.UUID
    name: str
    norm: str
    label: str
    part_count: int
    merged_into: uuid.UUID | None
    created_at: Any
    updated_at: Any
    has_embedding: bool


@dataclass(frozen=True)
class EntityCounts:
    """How much hangs on an entity."""

    mentions: int
    aliases: int
    edges: dict[str, int]


def candidates(namespace: uuid.UUID, lookup: Lookup, *, labels: Sequence[str] | None,
               limit: int, trigram_threshold: float) -> Plan[list[CandidateRow]]:
    """Live entities a phrase may name, best keys and similarities first."""
    yield Statement(_TRIGRAM_THRESHOLD, (str(trigram_threshold),))
    rows = yield Statement(_candidates_query(lookup, bool(labels)), {
        "ns": namespace, "q": lookup.norm, "f": lookup.folded, "keys": lookup.keys,
        "prefix": lookup.prefix, "acronym": lookup.acronym, "labels": list(labels or []),
        "limit": limit})
    return [CandidateRow(r[0], r[1], r[2], int(r[3]), r[4], r[5], float(r[6] or 0.0), r[7])
            for r in rows]


def _candidates_query(lookup: Lookup, labelled: bool) -> sql.Composed:
    labels = sql.SQL("e.label = ANY(%(labels)s)" if labelled else "true")
    near = [sql.Placeholder("q")]
    if lookup.folded and lookup.folded != lookup.norm:
        near.append(sql.Placeholder("f"))
    key = sql.SQL("e.norm = ANY(%(keys)s)")
    alias_key = sql.SQL("a.norm = ANY(%(keys)s)")
    branches = [_NAME_COLUMNS.format(key=key, labels=labels) + _BY_KEY,
                _ALIAS_COLUMNS.format(key=alias_key, labels=labels) + _ALIAS_BY_KEY]
    for term in near:
        branches.append(_NAME_COLUMNS.format(key=key, labels=labels)
                        + _BY_TRIGRAM.format(term))
        branches.append(_ALIAS_COLUMNS.format(key=alias_key, labels=labels)
                        + _ALIAS_BY_TRIGRAM.format(term))
    branches.append(_NAME_COLUMNS.format(key=key, labels=labels) + _BY_PREFIX)
    if lookup.folded:
        branches.append(_NAME_COLUMNS.format(key=key, labels=labels) + _BY_FOLD)
    if lookup.acronym is not None:
        branches.append(_NAME_COLUMNS.format(key=key, labels=labels) + _BY_INITIALS)
    return _RANKED.format(sql.SQL(" UNION ALL ").join(sql.SQL("({})").format(b)
                                                      for b in branches))


def nearest(namespace: uuid.UUID, vector: Sequence[float], *, labels: Sequence[str] | None,
            k: int) -> Plan[list[CandidateRow]]:
    """The `k` live entities whose name embeddings are nearest `vector` (HNSW, iterative scan:
    the namespace filter must not starve it)."""
    yield Statement(_HNSW, (str(max(HNSW_EF_SEARCH_MIN, k * 4)),))
    rows = yield Statement(_NEAREST, {
        "ns": namespace, "v": [float(x) for x in vector], "k": k,
        "labels": list(labels) if labels else None})
    return [CandidateRow(r[0], r[1], r[2], int(r[3]), r[4], r[5], max(0.0, float(r[6])))
            for r in rows]


def evidence(namespace: uuid.UUID, entity_ids: Sequence[uuid.UUID],
             per_entity: int) -> Plan[dict[uuid.UUID, list[Evidence]]]:
    """Up to `per_entity` mentions of each entity in live rows."""
    out: dict[uuid.UUID, list[Evidence]] = {}
    if not entity_ids or per_entity <= 0:
        return out
    rows = yield Statement(_EVIDENCE, {"ns": namespace, "ids": list(entity_ids),
                                       "n": per_entity})
    for entity_id, row_id, text, object_id in rows:
        out.setdefault(entity_id, []).append(Evidence(row_id, text, object_id))
    return out


def entities(namespace: uuid.UUID,
             ids: Sequence[uuid.UUID]) -> Plan[dict[uuid.UUID, EntityRecord]]:
    """The entity rows of `ids` in the namespace (merged ones too)."""
    rows = yield Statement(_ENTITY, (namespace, list(ids)))
    return {r[0]: EntityRecord(r[0], r[1], r[2], r[3], int(r[4]), r[5], r[6], r[7], bool(r[8]))
            for r in rows}


def details(namespace: uuid.UUID, entity_id: uuid.UUID,
            max_aliases: int) -> Plan[tuple[list[tuple[str, str]], EntityCounts]]:
    """An entity's aliases (the first `max_aliases`, with their source) and counts."""
    aliases = yield Statement(_ALIASES, (namespace, entity_id, max_aliases))
    counts = yield Statement(_COUNTS, {"ns": namespace, "id": entity_id})
    mentions, n_aliases, edges = counts[0]
    return ([(str(a), str(s)) for a, s in aliases],
            EntityCounts(int(mentions), int(n_aliases), {str(k): int(v) for k, v in edges.items()}))
