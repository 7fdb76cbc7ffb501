"""What the relay (and `brainstream verify`) read of the entity layer in Postgres.

The graph's entity layer is a function of these reads, never of an outbox payload:

- an entity is projected (a `NamedEntity` node) when it is not merged away and at least one live
  row (not deleted) mentions it;
- a root object `MENTIONS` a projected entity when a live row of it (itself or a part) names it,
  in the same namespace;
- an entity edge is projected when both its entities are, in the edge's namespace.

Every reader takes `ids` (the aggregates a relay batch names) or None for the whole database
(verify). Two statement texts, not an `OR` on a parameter: a prepared generic plan of the latter
would scan whole tables.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

from psycopg import sql

from pipeline.domain.projection import (
    ENTITY_EDGE_FIELDS,
    EntityEdgeKey,
    EntityEdgeState,
    MentionsState,
    NamedEntityState,
)
from pipeline.outbox.store import Conn


class EntityRow(NamedTuple):
    """An entity row and whether the graph should have its node."""

    id: uuid.UUID
    namespace_id: uuid.UUID
    name: str
    norm: str
    label: str
    part_count: int
    merged_into: uuid.UUID | None
    projected: bool

    def state(self) -> NamedEntityState:
        """The node the graph should hold (only meaningful when `projected`)."""
        return NamedEntityState(id=str(self.id), namespace=str(self.namespace_id),
                                name=self.name, norm=self.norm, label=self.label,
                                part_count=int(self.part_count))


def _mentioned(alias: str) -> sql.Composable:
    """Whether the entity `alias` is named by a live row of its own namespace."""
    return sql.SQL(
        "EXISTS (SELECT 1 FROM mentions lm JOIN objects lo ON lo.id = lm.row_id"
        " WHERE lm.entity_id = {a}.id AND lo.deleted_at IS NULL"
        " AND lo.namespace_id = {a}.namespace_id)").format(a=sql.Identifier(alias))


def _projected(alias: str) -> sql.Composable:
    return sql.SQL("({a}.merged_into IS NULL AND {m})").format(a=sql.Identifier(alias),
                                                               m=_mentioned(alias))


_ENTITIES = sql.SQL(
    "SELECT e.id, e.namespace_id, e.name, e.norm, e.label, e.part_count, e.merged_into, {p}"
    " FROM entities e WHERE {where}")

# The namespace test is written `(...) IS TRUE` for the reason `_LIVE_PROBE` gives below: as a
# plain equality, the planner, told by statistics that predate a new tenant that its namespace
# holds one object, read every entity of the database and probed `objects` by namespace and
# `mentions` by entity for each (42,465-79,520 probes, 0.3-0.7 s a batch of bench.ingest's
# burst, the relay's costliest statement). A batch's rows can only be found by their ids now.
_MENTIONS = sql.SQL(
    "SELECT coalesce(o.parent_id, o.id), m.entity_id, o.namespace_id, count(*),"
    " (array_agg(DISTINCT m.row_id ORDER BY m.row_id))[1:%(cap)s], max(o.updated_at)"
    " FROM mentions m JOIN objects o ON o.id = m.row_id JOIN entities e ON e.id = m.entity_id"
    " WHERE {where} AND o.deleted_at IS NULL AND e.merged_into IS NULL"
    " AND (e.namespace_id = o.namespace_id) IS TRUE"
    " GROUP BY 1, 2, 3")

# The readers by id (a relay batch) read edges by the primary key and the `to_id` index, then
# keep those whose two entities are projected, tested per entity with an index probe that stops
# at the first live mention (a LATERAL ... LIMIT 1 the planner cannot turn into a join). As
# EXISTS tests inside one statement, the planner was free to hash every mention of the
# database and scan every edge, for every batch: sampled during a steady stream, those reads
# were the busiest statement of Postgres (44% of its active samples). The namespace test is
# written `(...) IS TRUE`, which no index can serve: as a plain equality, the planner, told by
# statistics that predate a new tenant that its namespace holds about one object, drove the
# probe from `objects` by namespace and probed `mentions` once per object of the namespace
# (32,102 probes for 180 entities in bench.ingest's burst; a namespace of 100k objects would
# have been read in full per entity). Only `mentions` by entity can drive it now.
_LIVE_PROBE = ("LATERAL (SELECT 1 AS live FROM mentions lm JOIN objects lo ON lo.id = lm.row_id"
               " WHERE lm.entity_id = e.id AND lo.deleted_at IS NULL"
               " AND (lo.namespace_id = e.namespace_id) IS TRUE LIMIT 1) ok")
_ENTITIES_OF = sql.SQL(
    "SELECT e.id, e.namespace_id, e.name, e.norm, e.label, e.part_count, e.merged_into,"
    " e.merged_into IS NULL AND ok.live IS NOT NULL"
    f" FROM entities e LEFT JOIN {_LIVE_PROBE} ON true WHERE e.id = ANY(%(ids)b)")
# Arrays of ids go as binary parameters (`%b`), as in the write-back
# (pipeline/entities/store/writes.py): psycopg's text dump of a list is Python, per element.
# ids as text: the states hold strings
_EDGE_COLUMNS = ("x.from_id::text, x.edge_type, x.predicate, x.to_id::text, x.namespace_id::text,"
                 " x.weight, x.status, x.confidence, x.method, x.evidence[1:%(cap)s]::text[]")
_EDGES_TOUCHING = (f"SELECT {_EDGE_COLUMNS} FROM entity_edges x WHERE x.from_id = ANY(%(ids)b)"
                   f" UNION ALL SELECT {_EDGE_COLUMNS} FROM entity_edges x"
                   " WHERE x.to_id = ANY(%(ids)b) AND NOT x.from_id = ANY(%(ids)b)")
_EDGES_BETWEEN = (f"SELECT {_EDGE_COLUMNS} FROM entity_edges x WHERE (x.from_id, x.to_id) IN"
                  " (SELECT * FROM unnest(%(a)b::uuid[], %(b)b::uuid[]))")
# the projected ones of `ids`, as text (`_projected_edges` compares them with edge rows')
_PROJECTED_OF = (f"SELECT e.id::text, e.namespace_id::text FROM entities e CROSS JOIN {_LIVE_PROBE}"
                 " WHERE e.id = ANY(%(ids)b::uuid[]) AND e.merged_into IS NULL")

_EDGES = sql.SQL(
    "SELECT x.from_id, x.edge_type, x.predicate, x.to_id, x.namespace_id, x.weight, x.status,"
    " x.confidence, x.method, x.evidence[1:%(cap)s]"
    " FROM entity_edges x JOIN entities f ON f.id = x.from_id JOIN entities t ON t.id = x.to_id"
    " WHERE {where} AND f.namespace_id = x.namespace_id AND t.namespace_id = x.namespace_id"
    " AND {pf} AND {pt}")


def load_entities(conn: Conn, ids: Sequence[uuid.UUID] | None) -> dict[uuid.UUID, EntityRow]:
    """The entity rows of `ids` that exist (merged ones included), or, with None, every
    projected entity."""
    query = _ENTITIES.format(p=_projected("e"), where=_projected("e")) if ids is None \
        else _ENTITIES_OF
    rows = conn.execute(query, {"ids": list(ids or [])}).fetchall()
    return {row[0]: EntityRow(*row) for row in rows}


def load_mentions(conn: Conn, roots: Sequence[uuid.UUID] | None, *, parts_cap: int
                  ) -> list[MentionsState]:
    """The MENTIONS the graph should hold from `roots` (every root, with None)."""
    where = sql.SQL("TRUE") if roots is None else sql.SQL(
        "(o.id = ANY(%(ids)s) OR o.parent_id = ANY(%(ids)s))")
    rows = conn.execute(_MENTIONS.format(where=where),
                        {"ids": list(roots or []), "cap": parts_cap}).fetchall()
    return [MentionsState(root_id=str(r[0]), entity_id=str(r[1]), namespace=str(r[2]),
                          count=int(r[3]), parts=tuple(str(p) for p in r[4]),
                          updated_at=r[5].isoformat()) for r in rows]


def mentioned_by(conn: Conn, roots: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Every entity any row of `roots` mentions, live or not (a deleted root's entities may
    have lost their last live mention)."""
    rows = conn.execute(
        "SELECT DISTINCT m.entity_id FROM mentions m JOIN objects o ON o.id = m.row_id"
        " WHERE o.id = ANY(%(ids)s) OR o.parent_id = ANY(%(ids)s)",
        {"ids": list(roots)}).fetchall()
    return {row[0] for row in rows}


def load_entity_edges(conn: Conn, ids: Sequence[uuid.UUID] | None, *, evidence_cap: int
                      ) -> list[EntityEdgeState]:
    """The entity edges the graph should hold touching `ids` (all of them, with None)."""
    if ids is not None:
        return _projected_edges(conn, conn.execute(_EDGES_TOUCHING, {
            "ids": list(ids), "cap": evidence_cap}).fetchall())
    query = _EDGES.format(where=sql.SQL("TRUE"), pf=_projected("f"), pt=_projected("t"))
    return [_edge_state(r) for r in conn.execute(query, {"cap": evidence_cap}).fetchall()]


def load_entity_edges_between(conn: Conn, pairs: Sequence[tuple[uuid.UUID, uuid.UUID]], *,
                              evidence_cap: int) -> list[EntityEdgeState]:
    """The entity edges the graph should hold between the two entities of each pair (either
    direction, every type). Both orientations are looked up by the primary key's leading
    column, not by an OR the planner would turn into a scan."""
    if not pairs:
        return []
    starts = [a for a, _ in pairs] + [b for _, b in pairs]
    ends = [b for _, b in pairs] + [a for a, _ in pairs]
    return _projected_edges(conn, conn.execute(_EDGES_BETWEEN, {
        "a": starts, "b": ends, "cap": evidence_cap}).fetchall())


def _projected_edges(conn: Conn, rows: Sequence[Sequence[Any]]) -> list[EntityEdgeState]:
    """The edge rows whose two entities are projected, in the edge's namespace."""
    ends = sorted({r[0] for r in rows} | {r[3] for r in rows})
    live = dict(conn.execute(_PROJECTED_OF, {"ids": ends}).fetchall()) if ends else {}
    return [_edge_state(r) for r in rows if live.get(r[0]) == r[4] and live.get(r[3]) == r[4]]


def _edge_state(row: Sequence[Any]) -> EntityEdgeState:
    from_id, edge_type, predicate, to_id, namespace, weight, status, confidence, method, \
        evidence = row
    fields = ENTITY_EDGE_FIELDS[edge_type]
    return EntityEdgeState(
        key=EntityEdgeKey(str(from_id), edge_type, predicate if "predicate" in fields else "",
                          str(to_id)),
        namespace=str(namespace),
        weight=float(weight) if "weight" in fields else None,
        status=status if "status" in fields else None,
        confidence=None if "confidence" not in fields or confidence is None
        else float(confidence),
        method=method if "method" in fields else None,
        evidence=tuple(str(e) for e in evidence) if "evidence" in fields else None)
