"""Links as of a world time and a system time, read from Postgres `link_versions`.

The graph holds the current state only; an as-of read (`as_of`, `known_at` on expand, find_links,
recipes and paths) walks the versions instead. A version counts at (W, K) when it holds, was
believed at K (recorded by then, not invalidated by then) and its validity covers W
(migrations/0050_history.sql). Without `known_at` the read is "as known now": only versions
still believed, which the partial indexes `link_versions_{from,to}_now` serve.

The walk answers like the graph's (`pipeline/graph/falkordb/reader.py`): breadth-first over all
seeds, a node reported once at the depth it is first reached, claimed by the earliest node of
the previous depth, its edge the first by (relation type, 'out' before 'in'); only live
first-class objects of the namespace are reached or walked through.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from pipeline.domain.read_model import AsOf, Direction, EdgeHit, Neighbor, Relation
from pipeline.postgres.pool import AsyncConn, read_connection

# The full-text query of find_links: any word of the query (the graph's edge search ORs them
# too), each word cut as the graph cuts it.
MAX_QUERY_TOKENS = 32
MAX_TOKEN_CHARS = 64
_WORD = re.compile(r"\w+")

# An endpoint `o` the walk may reach: a live first-class object of the namespace.
_LIVE_END = ("EXISTS (SELECT 1 FROM objects o WHERE o.id = {end} AND o.namespace_id = %(ns)s"
             " AND o.deleted_at IS NULL AND o.parent_id IS NULL)")


def counts_at(at: AsOf) -> tuple[sql.Composable, dict[str, Any]]:
    """The condition that a version `v` counts at `at`, and its parameters (`at_world`,
    `at_known`)."""
    params: dict[str, Any] = {"at_world": at.world or datetime.now(UTC)}
    if at.known is None:  # as known now: the versions still believed (partial indexes)
        believed = "v.invalidated_at IS NULL"
    else:
        believed = ("v.recorded_at <= %(at_known)s AND (v.invalidated_at IS NULL"
                    " OR v.invalidated_at > %(at_known)s)")
        params["at_known"] = at.known
    return sql.SQL(
        "v.state = 'holds' AND " + believed +
        " AND (v.valid_from IS NULL OR v.valid_from <= %(at_world)s)"
        " AND (v.valid_to IS NULL OR v.valid_to > %(at_world)s)"), params


def _side(end: Literal["from", "to"], types: bool, counts: sql.Composable) -> sql.Composed:
    """The versions counting at the point with one end at the frontier node `f.id`."""
    near, far = ("from_id", "to_id") if end == "from" else ("to_id", "from_id")
    return sql.SQL("""
    SELECT v.{far} AS other, {dir} AS dir, v.relation_type, v.seq, v.meta, v.valid_from,
           v.valid_to
    FROM link_versions v
    WHERE v.{near} = f.id AND v.namespace_id = %(ns)s {types} AND {counts}
      AND {live}""").format(
        far=sql.Identifier(far), near=sql.Identifier(near),
        dir=sql.Literal("out" if end == "from" else "in"),
        types=sql.SQL("AND v.relation_type = ANY(%(types)s::text[])" if types else ""),
        counts=counts, live=sql.SQL(_LIVE_END.format(end=f"v.{far}")))


def _round_query(direction: Direction, types: bool, counts: sql.Composable) -> sql.Composed:
    sides = []
    if direction in ("out", "both"):
        sides.append(_side("from", types, counts))
    if direction in ("in", "both"):
        sides.append(_side("to", types, counts))
    return sql.SQL("""
SELECT f.pos, e.* FROM unnest(%(ids)s::uuid[]) WITH ORDINALITY AS f(id, pos)
CROSS JOIN LATERAL ({sides}) e
""").format(sides=sql.SQL(" UNION ALL ").join(sides))


def _find_query(counts: sql.Composable) -> sql.Composed:
    return sql.SQL("""
WITH q AS (SELECT to_tsquery('english', array_to_string(ARRAY(
               SELECT quote_literal(t) FROM unnest(%(terms)s::text[]) t), ' | ')) AS q),
hits AS (
    SELECT DISTINCT ON (v.from_id, v.to_id) v.from_id, v.to_id, v.meta, v.valid_from,
           v.valid_to, ts_rank(to_tsvector('english', v.meta->>'note'), q.q) AS score
    FROM link_versions v, q
    WHERE v.namespace_id = %(ns)s AND v.relation_type = %(type)s AND {counts}
      AND to_tsvector('english', coalesce(v.meta->>'note', '')) @@ q.q
      AND {live_from} AND {live_to}
    ORDER BY v.from_id, v.to_id, v.seq DESC)
SELECT * FROM hits ORDER BY score DESC, from_id, to_id LIMIT %(k)s
""").format(counts=counts, live_from=sql.SQL(_LIVE_END.format(end="v.from_id")),
            live_to=sql.SQL(_LIVE_END.format(end="v.to_id")))


def query_terms(text: str) -> list[str]:
    """The words of a find_links query, de-duplicated, in order."""
    terms: dict[str, None] = {}
    for match in _WORD.finditer(text):
        token = match.group()[:MAX_TOKEN_CHARS].strip("_")
        if token:
            terms.setdefault(token.lower(), None)
    return list(terms)[:MAX_QUERY_TOKENS]


def _float(value: object) -> float | None:
    try:
        return float(value) if value is not None else None  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _uuid(value: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


class PgLinkVersions:
    """Neighbour walks and edge-note search over the link versions counting at a point."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn]) -> None:
        self.pool = pool

    async def _rows(self, query: sql.Composed, params: dict[str, Any]) -> list[dict[str, Any]]:
        async with read_connection(self.pool) as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(query, params)
            return await cur.fetchall()

    async def find_edges(self, namespace: uuid.UUID, relation_type: str, query: str, k: int,
                         at: AsOf) -> list[EdgeHit]:
        """Top k links of one relation type counting at `at` whose note matches any word of
        `query` (English full text, ranked by `ts_rank`), both ends live objects."""
        terms = query_terms(query)
        if not terms or k <= 0:
            return []
        counts, params = counts_at(at)
        rows = await self._rows(_find_query(counts), {
            **params, "ns": namespace, "type": relation_type, "terms": terms, "k": k})
        return [EdgeHit(from_id=r["from_id"], to_id=r["to_id"], relation_type=relation_type,
                        score=float(r["score"] or 0.0), note=_opt_str(r["meta"].get("note")),
                        status=_opt_str(r["meta"].get("status")),
                        role=_opt_str(r["meta"].get("role")),
                        confidence=_float(r["meta"].get("confidence")) or 0.0,
                        evidence_id=_uuid(r["meta"].get("evidence_id")),
                        valid_from=r["valid_from"], valid_to=r["valid_to"]) for r in rows]

    async def neighbors(self, namespace: uuid.UUID, seeds: Sequence[uuid.UUID],
                        relation_types: Sequence[str], direction: Direction, max_hops: int,
                        limit: int, at: AsOf) -> list[Neighbor]:
        """Live objects within `max_hops` of the seeds (seeds excluded) over the links counting
        at `at`, nearest first, as the graph's walk orders and claims them (module docstring);
        one query per depth."""
        ordered = list(dict.fromkeys(seeds))
        if not ordered or limit <= 0:
            return []
        types = sorted(set(relation_types))
        counts, params = counts_at(at)
        query = _round_query(direction, bool(types), counts)
        frontier, ranks = ordered, list(range(len(ordered)))
        seen = set(ordered)
        out: list[Neighbor] = []
        for depth in range(1, max_hops + 1):
            rows = await self._rows(query, {**params, "ns": namespace, "ids": frontier,
                                            "types": types})
            # per reached node: the claiming source (earliest position), then its best edge
            best: dict[uuid.UUID, tuple[tuple[int, str, int, int], dict[str, Any]]] = {}
            for row in rows:
                other = row["other"]
                if other in seen:
                    continue
                key = (int(row["pos"]), str(row["relation_type"]), int(row["dir"] != "out"),
                       -int(row["seq"]))
                if other not in best or key < best[other][0]:
                    best[other] = (key, row)
            reached = sorted(best, key=lambda n: (best[n][0][0], n))[:limit - len(out)]
            next_frontier: list[uuid.UUID] = []
            next_ranks: list[int] = []
            for node in reached:
                key, row = best[node]
                pos = key[0] - 1  # WITH ORDINALITY counts from 1
                seen.add(node)
                out.append(Neighbor(id=node, depth=depth, seed_id=ordered[ranks[pos]],
                                    relation=_relation(row, frontier[pos], depth)))
                next_frontier.append(node)
                next_ranks.append(ranks[pos])
            frontier, ranks = next_frontier, next_ranks
            if not frontier or len(out) >= limit:
                break
        return out[:limit]


def _relation(row: dict[str, Any], source: uuid.UUID, depth: int) -> Relation:
    meta = row["meta"] or {}
    direction: Literal["out", "in"] = "out" if row["dir"] == "out" else "in"
    return Relation(type=row["relation_type"], direction=direction, depth=depth,
                    source_id=source, note=_opt_str(meta.get("note")),
                    status=_opt_str(meta.get("status")), role=_opt_str(meta.get("role")),
                    confidence=_float(meta.get("confidence")) or None,
                    evidence_id=_uuid(meta.get("evidence_id")),
                    valid_from=row["valid_from"], valid_to=row["valid_to"])
