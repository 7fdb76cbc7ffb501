"""`PathGraph` on Postgres: the mixed graph of objects and entities that `POST /v1/paths` walks.

Only what is visible takes part: live objects of the namespace (a part only with a live parent),
live messages of live sessions (migration 0055's `message_mentions`; walked only when asked),
links whose ends are both live, mentions made by live rows, entities not merged away, entity
edges with at least one live row stating them (CO_OCCURS, RELATES) or verified by a person
(POSSIBLY_SAME). Evidence is read from the same rows, so an answer never cites a deleted one.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from pipeline.domain.paths import Citation, GraphEdge, Hub, NodeInfo, NodeRef
from pipeline.domain.read_model import AsOf
from pipeline.postgres.pool import AsyncConn, read_connection
from pipeline.retrieval.store.link_versions import counts_at

EdgeKey = tuple[NodeRef, NodeRef, str, str]

# Characters of context on each side of a cited span, and the longest span a snippet shows.
SNIPPET_CONTEXT = 80
SNIPPET_MAX_SPAN = 240

# A live row `r` of the namespace: not deleted, and a part only under a live parent.
_LIVE_ROW = ("r.namespace_id = %(ns)s AND r.deleted_at IS NULL AND (r.parent_id IS NULL OR"
             " EXISTS (SELECT 1 FROM objects p WHERE p.id = r.parent_id"
             " AND p.deleted_at IS NULL))")

# How many live rows state an entity edge `ee` (its evidence array, filtered).
_LIVE_EVIDENCE = ("(SELECT count(*) FROM unnest(ee.evidence) ev(id) JOIN objects r ON r.id = ev.id"
                  " WHERE " + _LIVE_ROW + ")")

# Rows asked by id are found by id: the namespace tests on them are written `(...) IS TRUE`,
# which no index serves, so statistics that predate a tenant (its namespace "about one row")
# cannot turn a lookup of a few ids into a scan of the namespace (pipeline/lexical/queue.py).
_ENDPOINTS = sql.SQL("""
SELECT o.id AS asked, 'object' AS type, o.id, o.parent_id IS NOT NULL AS is_part
FROM objects o WHERE o.id = ANY(%(ids)s::uuid[]) AND (o.namespace_id = %(ns)s) IS TRUE
  AND o.deleted_at IS NULL AND (o.parent_id IS NULL OR EXISTS (
      SELECT 1 FROM objects p WHERE p.id = o.parent_id AND p.deleted_at IS NULL))
UNION ALL
SELECT c.asked, 'entity', c.id, false FROM (
    WITH RECURSIVE chain(asked, id, merged_into, depth) AS (
        SELECT e.id, e.id, e.merged_into, 0 FROM entities e
        WHERE e.id = ANY(%(ids)s::uuid[]) AND (e.namespace_id = %(ns)s) IS TRUE
        UNION ALL
        SELECT c.asked, e.id, e.merged_into, c.depth + 1 FROM chain c
        JOIN entities e ON e.id = c.merged_into AND e.namespace_id = %(ns)s
        WHERE c.depth < 32)
    SELECT asked, id FROM chain WHERE merged_into IS NULL) c
UNION ALL
SELECT g.uuid, 'message', g.uuid, false FROM messages g
WHERE g.uuid = ANY(%(ids)s::uuid[]) AND (g.namespace_id = %(ns)s) IS TRUE
  AND g.deleted_at IS NULL
  AND EXISTS (SELECT 1 FROM sessions s WHERE s.id = g.session_pk AND s.deleted_at IS NULL)
""")

# A live message `g` of a live session (a hidden message counts for nothing).
_LIVE_MESSAGE = ("JOIN messages g ON g.namespace_id = mm.namespace_id"
                 " AND g.uuid = mm.message_uuid AND g.deleted_at IS NULL"
                 " JOIN sessions s ON s.id = g.session_pk AND s.deleted_at IS NULL")

# Every edge incident to the frontier: links either way, MENTIONS from the frontier's objects
# (their own rows and their parts) and to its entities, entity edges either way.
_EDGES = sql.SQL("""
WITH lr AS (
    SELECT r.id, coalesce(r.parent_id, r.id) AS root FROM objects r
    WHERE (r.id = ANY(%(objs)s::uuid[]) OR r.parent_id = ANY(%(objs)s::uuid[])) AND {live}
)
SELECT * FROM (
    {links}
    UNION ALL
    SELECT 'MENTIONS', lr.root, 'object', m.entity_id, 'entity', '', count(*)::float8, 0
    FROM lr JOIN mentions m ON m.row_id = lr.id
    JOIN entities e ON e.id = m.entity_id AND e.merged_into IS NULL
    WHERE m.namespace_id = %(ns)s
    GROUP BY lr.root, m.entity_id
    UNION ALL
    SELECT 'MENTIONS', coalesce(r.parent_id, r.id), 'object', m.entity_id, 'entity', '',
           count(*)::float8, 0
    FROM mentions m JOIN objects r ON r.id = m.row_id
    WHERE m.entity_id = ANY(%(ents)s::uuid[]) AND m.namespace_id = %(ns)s AND {live}
    GROUP BY coalesce(r.parent_id, r.id), m.entity_id
    UNION ALL
    SELECT 'MENTIONS', mm.message_uuid, 'message', mm.entity_id, 'entity', '', count(*)::float8,
           0
    FROM message_mentions mm {live_message}
    JOIN entities e ON e.id = mm.entity_id AND e.merged_into IS NULL
    WHERE %(messages)s AND mm.namespace_id = %(ns)s
      AND (mm.message_uuid = ANY(%(msgs)s::uuid[]) OR mm.entity_id = ANY(%(ents)s::uuid[]))
    GROUP BY mm.message_uuid, mm.entity_id
    UNION ALL
    SELECT ee.edge_type, ee.from_id, 'entity', ee.to_id, 'entity', ee.predicate,
           CASE ee.edge_type WHEN 'CO_OCCURS' THEN ee.weight::float8
                ELSE {evidence}::float8 END,
           coalesce(ee.confidence, 0)::float8
    FROM entity_edges ee
    JOIN entities ef ON ef.id = ee.from_id AND ef.merged_into IS NULL
    JOIN entities et ON et.id = ee.to_id AND et.merged_into IS NULL
    WHERE (ee.from_id = ANY(%(ents)s::uuid[]) OR ee.to_id = ANY(%(ents)s::uuid[]))
      AND ee.namespace_id = %(ns)s
      AND CASE ee.edge_type WHEN 'POSSIBLY_SAME' THEN ee.status = 'verified'
               ELSE {evidence} > 0 END
) edges LIMIT %(limit)s
""")

# The links of the frontier as they are now (`links`), and as of a point (their versions, one
# row per link: `counts` is `link_versions.counts_at`).
_LINKS_NOW = sql.SQL("""
    SELECT 'LINK' AS type, l.from_id AS a, 'object' AS a_type, l.to_id AS b, 'object' AS b_type,
           l.relation_type AS relation, 1.0::float8 AS weight,
           coalesce((l.meta->>'confidence')::float8, 0) AS confidence
    FROM links l
    WHERE (l.from_id = ANY(%(objs)s::uuid[]) OR l.to_id = ANY(%(objs)s::uuid[]))
      AND l.namespace_id = %(ns)s AND l.deleted_at IS NULL
      AND EXISTS (SELECT 1 FROM objects f WHERE f.id = l.from_id AND f.namespace_id = %(ns)s
                  AND f.deleted_at IS NULL AND f.parent_id IS NULL)
      AND EXISTS (SELECT 1 FROM objects t WHERE t.id = l.to_id AND t.namespace_id = %(ns)s
                  AND t.deleted_at IS NULL AND t.parent_id IS NULL)""")
_LINKS_AS_OF = sql.SQL("""
    SELECT DISTINCT ON (v.from_id, v.relation_type, v.to_id)
           'LINK' AS type, v.from_id AS a, 'object' AS a_type, v.to_id AS b, 'object' AS b_type,
           v.relation_type AS relation, 1.0::float8 AS weight,
           coalesce((v.meta->>'confidence')::float8, 0) AS confidence
    FROM link_versions v
    WHERE (v.from_id = ANY(%(objs)s::uuid[]) OR v.to_id = ANY(%(objs)s::uuid[]))
      AND v.namespace_id = %(ns)s AND {counts}
      AND EXISTS (SELECT 1 FROM objects f WHERE f.id = v.from_id AND f.namespace_id = %(ns)s
                  AND f.deleted_at IS NULL AND f.parent_id IS NULL)
      AND EXISTS (SELECT 1 FROM objects t WHERE t.id = v.to_id AND t.namespace_id = %(ns)s
                  AND t.deleted_at IS NULL AND t.parent_id IS NULL)""")


def _edges_query(links: sql.Composable) -> sql.Composed:
    return _EDGES.format(live=sql.SQL(_LIVE_ROW), evidence=sql.SQL(_LIVE_EVIDENCE),
                         live_message=sql.SQL(_LIVE_MESSAGE), links=links)


# Hub candidates first: the namespace's rows are counted only when some entity is named often.
_HUB_CANDIDATES = sql.SQL("""
SELECT e.id, e.name, e.part_count FROM entities e
WHERE e.id = ANY(%(ids)s::uuid[]) AND (e.namespace_id = %(ns)s) IS TRUE
  AND e.part_count >= %(min_parts)s
""")
_LIVE_ROWS = sql.SQL(
    "SELECT count(*) AS n FROM objects WHERE namespace_id = %(ns)s AND deleted_at IS NULL")

_NODES = sql.SQL("""
SELECT 'object' AS type, o.id, o.kind, o.title, NULL AS name, NULL AS label,
       NULL::int AS part_count, NULL AS session_id, NULL AS role
FROM objects o WHERE o.id = ANY(%(objs)s::uuid[]) AND (o.namespace_id = %(ns)s) IS TRUE
  AND o.deleted_at IS NULL
UNION ALL
SELECT 'entity', e.id, NULL, NULL, e.name, e.label, e.part_count, NULL, NULL
FROM entities e WHERE e.id = ANY(%(ents)s::uuid[]) AND (e.namespace_id = %(ns)s) IS TRUE
UNION ALL
SELECT 'message', g.uuid, 'message', left(g.content, %(title)s), NULL, NULL, NULL, s.session_id,
       g.role
FROM messages g JOIN sessions s ON s.id = g.session_pk AND s.deleted_at IS NULL
WHERE g.uuid = ANY(%(msgs)s::uuid[]) AND (g.namespace_id = %(ns)s) IS TRUE
  AND g.deleted_at IS NULL
""")

# Characters of a message's content its node shows as `title`.
MESSAGE_TITLE_CHARS = 120

# The text of field `f` of row `r`, and a snippet of it around [lo, hi).
_BODY = "(CASE {f} WHEN 'title' THEN r.title WHEN 'summary' THEN r.summary ELSE r.content END)"
_SNIPPET = ("substr({body}, greatest(1, {lo} + 1 - %(ctx)s),"
            " least({hi} - {lo}, %(span)s) + %(ctx)s + least({lo}, %(ctx)s))")

_MENTION_CITES = sql.SQL("""
SELECT p.root, p.entity, x.* FROM unnest(%(roots)s::uuid[], %(ents)s::uuid[]) AS p(root, entity)
CROSS JOIN LATERAL (
    SELECT r.id AS row_id, m.field, m.start_pos, m.end_pos, m.text,
           {snippet} AS snippet
    FROM objects r JOIN mentions m ON m.row_id = r.id AND m.entity_id = p.entity
    WHERE (r.id = p.root OR r.parent_id = p.root) AND {live}
    ORDER BY r.parent_id NULLS FIRST, r.position, m.field, m.start_pos
    LIMIT %(per)s) x
""").format(live=sql.SQL(_LIVE_ROW), snippet=sql.SQL(_SNIPPET.format(
    body=_BODY.format(f="m.field"), lo="m.start_pos", hi="m.end_pos")))

# A row that states an entity edge, and the span of it naming the edge's ends (the field that
# names most of them; the row's start when none of its mentions does).
_ENTITY_CITES = sql.SQL("""
SELECT q.f, q.t, q.typ, q.pred, x.*
FROM unnest(%(froms)s::uuid[], %(tos)s::uuid[], %(types)s::text[], %(preds)s::text[])
     AS q(f, t, typ, pred)
JOIN entity_edges ee ON ee.from_id = q.f AND ee.to_id = q.t AND ee.edge_type = q.typ
                    AND ee.predicate = q.pred AND ee.namespace_id = %(ns)s
CROSS JOIN LATERAL (
    SELECT r.id AS row_id, coalesce(r.parent_id, r.id) AS root,
           coalesce(sp.field, 'content') AS field, sp.lo AS start_pos, sp.hi AS end_pos,
           {snippet} AS snippet
    FROM unnest(ee.evidence) WITH ORDINALITY ev(id, ord) JOIN objects r ON r.id = ev.id
    LEFT JOIN LATERAL (
        SELECT m.field, min(m.start_pos) AS lo, max(m.end_pos) AS hi FROM mentions m
        WHERE m.row_id = r.id AND m.entity_id IN (ee.from_id, ee.to_id)
        GROUP BY m.field ORDER BY count(DISTINCT m.entity_id) DESC, m.field LIMIT 1) sp ON true
    WHERE {live}
    ORDER BY ev.ord LIMIT %(per)s) x
""").format(live=sql.SQL(_LIVE_ROW), snippet=sql.SQL(_SNIPPET.format(
    body=_BODY.format(f="coalesce(sp.field, 'content')"), lo="coalesce(sp.lo, 0)",
    hi="coalesce(sp.hi, 0)")))

# A message's spans naming the entity, with a snippet of its content.
_MESSAGE_CITES = sql.SQL("""
SELECT p.msg, p.entity, x.* FROM unnest(%(msgs)s::uuid[], %(ents)s::uuid[]) AS p(msg, entity)
CROSS JOIN LATERAL (
    SELECT g.uuid AS row_id, s.session_id, mm.start_pos, mm.end_pos, mm.text,
           {snippet} AS snippet
    FROM message_mentions mm {live_message}
    WHERE mm.namespace_id = %(ns)s AND mm.message_uuid = p.msg AND mm.entity_id = p.entity
    ORDER BY mm.start_pos LIMIT %(per)s) x
""").format(live_message=sql.SQL(_LIVE_MESSAGE), snippet=sql.SQL(_SNIPPET.format(
    body="g.content", lo="mm.start_pos", hi="mm.end_pos")))

_LINK_CITES = sql.SQL("""
SELECT l.from_id, l.relation_type, l.to_id, l.meta
FROM unnest(%(froms)s::uuid[], %(rels)s::text[], %(tos)s::uuid[]) AS q(f, rel, t)
JOIN links l ON l.from_id = q.f AND l.relation_type = q.rel AND l.to_id = q.t
WHERE l.namespace_id = %(ns)s AND l.deleted_at IS NULL
""")
_LINK_CITES_AS_OF = sql.SQL("""
SELECT DISTINCT ON (v.from_id, v.relation_type, v.to_id)
       v.from_id, v.relation_type, v.to_id, v.meta, v.valid_from, v.valid_to
FROM unnest(%(froms)s::uuid[], %(rels)s::text[], %(tos)s::uuid[]) AS q(f, rel, t)
JOIN link_versions v ON v.from_id = q.f AND v.relation_type = q.rel AND v.to_id = q.t
WHERE v.namespace_id = %(ns)s AND {counts}
ORDER BY v.from_id, v.relation_type, v.to_id, v.seq DESC
""")


class PgPathGraph:
    """`PathGraph` on Postgres (see the module's docstring); `at` (None: now) reads the links
    as of a world and a system time, from their versions."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn], at: AsOf | None = None) -> None:
        self.pool = pool
        self.at = at
        self._links: sql.SQL | sql.Composed = _LINKS_NOW
        self._link_cites: sql.SQL | sql.Composed = _LINK_CITES
        self._at_params: dict[str, Any] = {}
        if at is not None:
            counts, self._at_params = counts_at(at)
            self._links = _LINKS_AS_OF.format(counts=counts)
            self._link_cites = _LINK_CITES_AS_OF.format(counts=counts)
        self._edges = _edges_query(self._links)

    def as_of(self, at: AsOf) -> PgPathGraph:
        """This graph with its links as they held at `at`."""
        return PgPathGraph(self.pool, at)

    async def _rows(self, query: sql.SQL | sql.Composed, params: dict[str, Any]
                    ) -> list[dict[str, Any]]:
        async with read_connection(self.pool) as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(query, params)
            return await cur.fetchall()

    async def endpoints(self, namespace: uuid.UUID, ids: Sequence[uuid.UUID]
                        ) -> dict[uuid.UUID, NodeRef | str]:
        """Each id as a node: a visible first-class object, or an entity (a merged one as the
        entity it was merged into); "part" for a visible part; absent when unknown."""
        rows = await self._rows(_ENDPOINTS, {"ns": namespace, "ids": list(ids)})
        return {row["asked"]: "part" if row["is_part"] else NodeRef(row["type"], row["id"])
                for row in rows}

    async def edges(self, namespace: uuid.UUID, frontier: Sequence[NodeRef], limit: int, *,
                    messages: bool = False) -> list[GraphEdge]:
        """The edges incident to the frontier's nodes, at most `limit`; with `messages`, the
        MENTIONS of live messages too."""
        objs = [n.id for n in frontier if n.type == "object"]
        ents = [n.id for n in frontier if n.type == "entity"]
        msgs = [n.id for n in frontier if n.type == "message"]
        rows = await self._rows(self._edges, {**self._at_params, "ns": namespace, "objs": objs,
                                              "ents": ents, "msgs": msgs, "messages": messages,
                                              "limit": limit})
        return [GraphEdge(NodeRef(r["a_type"], r["a"]), NodeRef(r["b_type"], r["b"]),
                          r["type"], r["relation"], float(r["weight"]), float(r["confidence"]))
                for r in rows]

    async def hubs(self, namespace: uuid.UUID, entity_ids: Sequence[uuid.UUID], *,
                   fraction: float, min_parts: int) -> list[Hub]:
        """The entities among `entity_ids` named in more than `fraction` of the namespace's
        live rows (`entities.part_count`) and in at least `min_parts`."""
        rows = await self._rows(_HUB_CANDIDATES, {"ns": namespace, "ids": list(entity_ids),
                                                  "min_parts": min_parts})
        if not rows:
            return []
        total = (await self._rows(_LIVE_ROWS, {"ns": namespace}))[0]["n"]
        return [Hub(r["id"], r["name"], r["part_count"]) for r in rows
                if r["part_count"] > fraction * total]

    async def nodes(self, namespace: uuid.UUID, refs: Sequence[NodeRef]
                    ) -> dict[NodeRef, NodeInfo]:
        """Kind and title of the objects, name, label and row count of the entities."""
        rows = await self._rows(_NODES, {
            "ns": namespace, "objs": [n.id for n in refs if n.type == "object"],
            "ents": [n.id for n in refs if n.type == "entity"],
            "msgs": [n.id for n in refs if n.type == "message"],
            "title": MESSAGE_TITLE_CHARS})
        out = {}
        for r in rows:
            ref = NodeRef(r["type"], r["id"])
            out[ref] = NodeInfo(ref, kind=r["kind"], title=r["title"], name=r["name"],
                                label=r["label"], part_count=r["part_count"],
                                session_id=r["session_id"], role=r["role"])
        return out

    async def citations(self, namespace: uuid.UUID, edges: Sequence[GraphEdge], per_edge: int
                        ) -> dict[EdgeKey, list[Citation]]:
        """Up to `per_edge` citations of each edge: MENTIONS by the spans naming the entity,
        CO_OCCURS and RELATES by the live rows stating them (and the span naming their ends),
        a link by its note and metadata."""
        out: dict[EdgeKey, list[Citation]] = {}
        snip = {"ns": namespace, "per": per_edge, "ctx": SNIPPET_CONTEXT,
                "span": SNIPPET_MAX_SPAN}
        mentions = [e for e in edges if e.type == "MENTIONS" and e.a.type == "object"]
        said = [e for e in edges if e.type == "MENTIONS" and e.a.type == "message"]
        if said:
            index0 = {(e.a.id, e.b.id): e.key for e in said}
            for r in await self._rows(_MESSAGE_CITES, {
                    **snip, "msgs": [e.a.id for e in said], "ents": [e.b.id for e in said]}):
                out.setdefault(index0[(r["msg"], r["entity"])], []).append(Citation(
                    row_id=r["row_id"], field="content", start=r["start_pos"],
                    end=r["end_pos"], text=r["text"], snippet=r["snippet"],
                    session_id=r["session_id"]))
        if mentions:
            index = {(e.a.id, e.b.id): e.key for e in mentions}
            for r in await self._rows(_MENTION_CITES, {
                    **snip, "roots": [e.a.id for e in mentions],
                    "ents": [e.b.id for e in mentions]}):
                out.setdefault(index[(r["root"], r["entity"])], []).append(Citation(
                    row_id=r["row_id"], object_id=r["root"], field=r["field"],
                    start=r["start_pos"], end=r["end_pos"], text=r["text"],
                    snippet=r["snippet"]))
        stated = [e for e in edges if e.type in ("CO_OCCURS", "RELATES", "POSSIBLY_SAME")]
        if stated:
            index2 = {(e.a.id, e.b.id, e.type, e.relation): e.key for e in stated}
            for r in await self._rows(_ENTITY_CITES, {
                    **snip, "froms": [e.a.id for e in stated], "tos": [e.b.id for e in stated],
                    "types": [e.type for e in stated], "preds": [e.relation for e in stated]}):
                out.setdefault(index2[(r["f"], r["t"], r["typ"], r["pred"])], []).append(
                    Citation(row_id=r["row_id"], object_id=r["root"], field=r["field"],
                             start=r["start_pos"], end=r["end_pos"], snippet=r["snippet"]))
        links = [e for e in edges if e.type == "LINK"]
        if links:
            index3 = {(e.a.id, e.relation, e.b.id): e.key for e in links}
            for r in await self._rows(self._link_cites, {
                    **self._at_params, "ns": namespace, "froms": [e.a.id for e in links],
                    "rels": [e.relation for e in links], "tos": [e.b.id for e in links]}):
                meta = dict(r["meta"] or {})
                note = meta.pop("note", None)
                out.setdefault(index3[(r["from_id"], r["relation_type"], r["to_id"])],
                               []).append(Citation(note=note, meta=meta,
                                                   valid_from=r.get("valid_from"),
                                                   valid_to=r.get("valid_to")))
        return out
