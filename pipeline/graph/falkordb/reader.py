"""FalkorDB adapter of the `GraphReader` port: the read side of the graph projection.

Entity find (full-text and vector), edge find (full-text on `note`, per relation type) and
neighbor walks, always scoped to one namespace. Every id returned must still be hydrated from
Postgres by the caller. Only read-only queries (`GRAPH.RO_QUERY`) are issued.

Errors (translated by `errors.graph_errors`): a graph that cannot be reached (refused or dropped
connection, timeout, server loading, query timeout, query queue full) raises `GraphUnavailable`,
whose message always contains "graph", so that the API can degrade; bad credentials raise
`ConfigError`; bad arguments (relation type, direction, max_hops, vector) raise `InvalidInput`
with the offending field. Two server replies are not errors here: a graph key that does not
exist yet (nothing projected) reads as an empty graph, and a full-text query RediSearch still
cannot parse finds nothing (logged).

The Cypher it sends is in `cypher.py`, with the quirks that shape it (RediSearch query syntax,
ASCII-only case folding, ordering of full-text matches, the walk's query plan).

FalkorDB 4.16.3 quirks absorbed here:
- `db.idx.vector.queryNodes(k)` cannot pre-filter and returns fewer than k rows when the index
  holds orphan entries: ask for more (`k * 4 + 20`), filter namespace and kinds in Cypher, and
  retry once with a larger k (estimated from the surviving fraction, capped at `vector_cap`)
  when too few survive. When the capped query is still short, other namespaces' nodes hold the
  slots (a tenant with many near-duplicates would crowd every other out): an exact scan of the
  namespace (`VECTOR_SCAN_QUERY`) answers instead. So fewer than k hits always means the
  namespace has no more.
  Its `score` is the cosine *distance* (0 = same direction, 2 = opposite): similarity = 1 - score.
- `queryRelationships` on a type without a full-text index quietly returns nothing; the reader
  still checks its cached capabilities first and re-reads them when a type is not known to be
  indexed (at most every `capability_ttl` seconds, default 1: the writer creates an edge index
  when a type first appears, and its first edge must be findable at once).
- The asyncio client's constructor probes the server *synchronously* (cluster detection): build
  readers at start-up (`from_settings`), not inside request handling.
- Without `hiredis`, redis-py parses replies in pure Python: a 200-row walk round costs ~10-20 ms
  on the client against ~3 ms on the server; with hiredis the client share drops 3-5x.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Sequence
from typing import Any, Literal

import falkordb.asyncio
import redis.exceptions as redis_errors

from pipeline.domain.errors import InvalidInput
from pipeline.domain.read_model import MAX_HOPS, Direction, EdgeHit, Hit, Neighbor, Relation
from pipeline.domain.relations import check_relation_type
from pipeline.graph.falkordb import cypher
from pipeline.graph.falkordb.cypher import MAX_WALK_LIMIT, fulltext_query
from pipeline.graph.falkordb.errors import graph_errors
from pipeline.graph.falkordb.schema import (
    INDEXES,
    GraphCapabilities,
    index_row,
    parse_capabilities,
)
from pipeline.graph.falkordb.settings import GraphSettings

log = logging.getLogger(__name__)

# The most entries one vector-index query may ask for; past it, an exact scan of the namespace
# answers (other namespaces' nodes filled every slot: the index cannot pre-filter).
DEFAULT_VECTOR_CAP = 4096
# Seconds between re-reads of the graph's indexes when a query finds one missing (the edge
# full-text index of a relation type first written since the last read).
CAPABILITY_TTL = 1.0

_EMPTY_KEY = "empty key"
_SYNTAX_ERROR = "RediSearch: Syntax error"


def _uuid(value: Any) -> uuid.UUID | None:
    """A stored id as a UUID, or None when it is not one (never raises)."""
    if value is None:
        return None
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


class FalkorGraphReader:
    """`GraphReader` on a FalkorDB graph written by `FalkorGraphWriter`.

    Capabilities (node full-text index, vector dimension, relation types with an edge full-text
    index) are resolved on the first call that needs them and cached; a call that finds one
    missing re-reads them, at most every `capability_ttl` seconds (a burst of misses, e.g. on a
    relation type that never exists, costs one read per interval).

    Counters, for the API's metrics and caps: `round_trips` counts every query sent;
    `last_walk_round_trips` the queries of the most recent `neighbors` call (at most `max_hops`;
    with concurrent calls on one reader, it belongs to whichever call finished last).
    """

    def __init__(self, db: falkordb.asyncio.FalkorDB, graph_name: str, *,
                 capability_ttl: float = 1.0, vector_cap: int = DEFAULT_VECTOR_CAP,
                 timeout_ms: int | None = 10_000) -> None:
        if vector_cap < 1:
            raise ValueError("vector_cap must be positive")
        self.graph_name = graph_name
        self.capability_ttl = capability_ttl
        self.vector_cap = vector_cap
        self.timeout_ms = timeout_ms
        self.round_trips = 0
        self.last_walk_round_trips = 0
        self._db = db
        self._graph: Any = db.select_graph(graph_name)
        self._caps: GraphCapabilities | None = None
        self._caps_lock = asyncio.Lock()

    @classmethod
    def from_settings(cls, settings: GraphSettings, **options: Any) -> FalkorGraphReader:
        """A reader on the configured graph; raises Unavailable if FalkorDB cannot be reached.

        Blocking: the client's constructor probes the server synchronously.
        """
        with graph_errors("connect"):
            db = falkordb.asyncio.FalkorDB.from_url(settings.effective_falkordb_url,
                                                    socket_connect_timeout=5,
                                                    socket_timeout=30)
        options = {"capability_ttl": CAPABILITY_TTL, "vector_cap": DEFAULT_VECTOR_CAP,
                   **options}
        return cls(db, settings.graph_name, **options)

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self._db.connection.aclose()

    # -- plumbing ---------------------------------------------------------------------------

    async def _query(self, query: str, params: dict[str, Any], what: str) -> list[list[Any]]:
        """Run a read-only query; a graph key that does not exist yet reads as no rows."""
        self.round_trips += 1
        with graph_errors(what):
            try:
                result = await self._graph.ro_query(query, params, timeout=self.timeout_ms)
            except redis_errors.ResponseError as exc:
                if _EMPTY_KEY in str(exc):
                    return []
                raise
        return list(result.result_set)

    async def _search(self, query: str, params: dict[str, Any], what: str) -> list[list[Any]]:
        """A full-text query; one that RediSearch still cannot parse finds nothing (logged)."""
        try:
            return await self._query(query, params, what)
        except redis_errors.ResponseError as exc:
            if _SYNTAX_ERROR not in str(exc):
                raise
            log.warning("graph %s: full-text query %r refused: %s", what, params.get("q"), exc)
            return []

    async def capabilities(self, *, refresh: bool = False) -> GraphCapabilities:
        """The cached capabilities; with `refresh`, re-read them if older than the TTL."""
        caps = self._caps
        if caps is not None and not (
                refresh and time.monotonic() - caps.resolved_at >= self.capability_ttl):
            return caps
        async with self._caps_lock:
            if self._caps is not caps:  # another task resolved them meanwhile
                assert self._caps is not None
                return self._caps
            rows = await self._query(INDEXES, {}, "capabilities")
            self._caps = parse_capabilities([index_row(row) for row in rows])
            return self._caps

    # -- entities ---------------------------------------------------------------------------

    async def find_entities_text(self, namespace: uuid.UUID, query: str,
                                 kinds: Sequence[str], k: int) -> list[Hit]:
        """Top k visible entities of the namespace (and kinds) by full-text score on title and
        index text; any word matches. Empty when the query holds no word."""
        q = fulltext_query(query)
        if not q or k <= 0:
            return []
        caps = await self.capabilities()
        if not caps.node_fulltext:
            caps = await self.capabilities(refresh=True)
            if not caps.node_fulltext:
                return []
        # A few spare rows, in case a stored id is not a UUID (those are skipped).
        rows = await self._search(
            cypher.TEXT_QUERY, {"q": q, "ns": str(namespace), "kinds": list(kinds), "k": k + 8},
            "find entities (text)")
        hits = []
        for node_id, score in rows:
            parsed = _uuid(node_id)
            if parsed is not None:
                hits.append(Hit(parsed, float(score or 0.0)))
        return hits[:k]

    async def find_entities_vector(self, namespace: uuid.UUID, vector: Sequence[float],
                                   kinds: Sequence[str], k: int) -> list[Hit]:
        """Top k visible entities of the namespace (and kinds) by cosine similarity (1 - cosine
        distance, in [-1, 1]). Over-fetches from the unfiltered index; retries once, larger."""
        if k <= 0:
            return []
        values = [float(x) for x in vector]
        if not values or not all(math.isfinite(x) for x in values):
            raise InvalidInput("the query vector is empty or holds NaN or infinity",
                               field="vector")
        caps = await self.capabilities()
        if caps.vector_dim is None:
            caps = await self.capabilities(refresh=True)
            if caps.vector_dim is None:
                return []
        if len(values) != caps.vector_dim:
            raise InvalidInput(f"the query vector has {len(values)} dimensions, the graph's "
                               f"vector index {caps.vector_dim}", field="vector")
        params: dict[str, Any] = {"v": values, "ns": str(namespace), "kinds": list(kinds)}
        k2 = min(self.vector_cap, k * 4 + 20)
        raw, found = await self._vector_round(params, k2)
        # The index gave (nearly) all we asked for, so it may hold more: ask again, larger.
        # Far fewer means the index is exhausted (orphan entries only shave a few off).
        if len(found) < k and k2 < self.vector_cap and raw * 2 >= k2:
            fraction = len(found) / raw if raw and found else 0.0
            wanted = math.ceil(k / fraction * 1.5) + 20 if fraction else self.vector_cap
            k2 = min(self.vector_cap, max(wanted, k2 * 4))
            raw, found = await self._vector_round(params, k2)
        if len(found) < k and k2 >= self.vector_cap and raw * 2 >= k2:
            # Capped and still short: other namespaces hold the slots. Scan this one exactly.
            found = await self._vector_scan(params, k)
        found.sort(key=lambda hit: (-hit.score, str(hit.id)))
        return found[:k]

    async def _vector_scan(self, params: dict[str, Any], k: int) -> list[Hit]:
        rows = await self._query(cypher.VECTOR_SCAN_QUERY, {**params, "k": k + 8},
                                 "find entities (vector scan)")
        hits = []
        for node_id, distance in rows:
            parsed = _uuid(node_id)
            if parsed is not None:
                hits.append(Hit(parsed, 1.0 - float(distance)))
        return hits

    async def _vector_round(self, params: dict[str, Any], k2: int) -> tuple[int, list[Hit]]:
        rows = await self._query(cypher.VECTOR_QUERY, {**params, "k2": k2},
                                 "find entities (vector)")
        if not rows:
            return 0, []
        raw, pairs = rows[0]
        hits = []
        for node_id, distance in pairs or []:
            parsed = _uuid(node_id)
            if parsed is not None:
                hits.append(Hit(parsed, 1.0 - float(distance)))
        return int(raw or 0), hits

    # -- edges ------------------------------------------------------------------------------

    async def find_edges(self, namespace: uuid.UUID, relation_type: str, query: str,
                         k: int) -> list[EdgeHit]:
        """Top k edges of one relation type in the namespace by full-text score on their note.
        Empty for a type without an edge full-text index (e.g. never written)."""
        check_relation_type(relation_type)
        q = fulltext_query(query)
        if not q or k <= 0:
            return []
        caps = await self.capabilities()
        if relation_type not in caps.edge_fulltext_types:
            caps = await self.capabilities(refresh=True)
            if relation_type not in caps.edge_fulltext_types:
                return []
        rows = await self._search(
            cypher.EDGE_QUERY, {"t": relation_type, "q": q, "ns": str(namespace), "k": k + 8},
            "find edges")
        hits = []
        for from_id, to_id, score, note, status, role, confidence, evidence_id in rows:
            source, target = _uuid(from_id), _uuid(to_id)
            if source is None or target is None:
                continue
            hits.append(EdgeHit(
                from_id=source, to_id=target, relation_type=relation_type,
                score=float(score or 0.0), note=_opt_str(note), status=_opt_str(status),
                role=_opt_str(role), confidence=float(confidence or 0.0),
                evidence_id=_uuid(evidence_id)))
        return hits[:k]

    # -- neighbors --------------------------------------------------------------------------

    async def neighbors(self, namespace: uuid.UUID, seeds: Sequence[uuid.UUID],
                        relation_types: Sequence[str], direction: Direction, max_hops: int,
                        limit: int) -> list[Neighbor]:
        """Visible nodes within `max_hops` of the seeds (seeds excluded), nearest first.

        Breadth-first over all seeds at once, one query per depth (`last_walk_round_trips`).
        A node is reported once, at the depth it is first reached, claimed by the earliest
        node of the previous depth that reaches it, in walk order: seeds in `seeds` order at
        depth 1, then each depth in the order it was reported. So a nearer seed beats an
        earlier one, and at equal depth the earliest seed wins. Between one source and the
        node, the edge reported is the first by relation type, then 'out' before 'in'.
        Within a depth, results are ordered by seed, then source, then id; the walk stops at
        the depth where `limit` nodes are reached. Placeholder nodes and nodes of other
        namespaces are neither returned nor walked through; unknown relation types match
        nothing.
        """
        if isinstance(max_hops, bool) or not isinstance(max_hops, int) or not (
                1 <= max_hops <= MAX_HOPS):
            raise InvalidInput(f"max_hops must be 1..{MAX_HOPS}", field="max_hops")
        if direction not in ("out", "in", "both"):
            raise InvalidInput("direction must be out, in or both", field="direction")
        if limit > MAX_WALK_LIMIT:
            raise InvalidInput(f"limit must be at most {MAX_WALK_LIMIT}", field="limit")
        types = sorted({check_relation_type(t) for t in relation_types})
        self.last_walk_round_trips = 0
        ordered = list(dict.fromkeys(seeds))
        if not ordered or limit <= 0:
            return []
        query = cypher.walk_query(types, direction)
        # The frontier in walk order, and the seed rank of each of its nodes.
        frontier = [[i, str(s)] for i, s in enumerate(ordered)]
        ranks = list(range(len(ordered)))
        seen_int: list[int] = []
        out: list[Neighbor] = []
        trips = 0
        try:
            for depth in range(1, max_hops + 1):
                trips += 1
                rows = await self._query(
                    query, {"frontier": frontier, "ns": str(namespace), "seen_int": seen_int,
                            "seeds": [str(s) for s in ordered], "remaining": limit - len(out)},
                    "neighbors")
                next_frontier: list[list[Any]] = []
                next_ranks: list[int] = []
                for internal_id, node_id, pos, source, best in rows:
                    seen_int.append(int(internal_id))
                    rank = ranks[int(pos)]
                    neighbor = _neighbor(node_id, source, best, depth, ordered[rank])
                    if neighbor is None:  # not a UUID: skipped, and not walked through
                        continue
                    next_frontier.append([len(next_frontier), str(node_id)])
                    next_ranks.append(rank)
                    out.append(neighbor)
                frontier, ranks = next_frontier, next_ranks
                if not frontier or len(out) >= limit:
                    break
        finally:
            self.last_walk_round_trips = trips
        return out[:limit]


def _neighbor(node_id: Any, source: Any, best: list[Any], depth: int,
              seed: uuid.UUID) -> Neighbor | None:
    """A walk row as a Neighbor (confidence 0, i.e. unset, reads as None), or None."""
    rel_type, rel_dir, note, status, role, confidence, evidence_id = best
    parsed, source_id = _uuid(node_id), _uuid(source)
    if parsed is None or source_id is None:
        return None
    direction: Literal["out", "in"] = "out" if rel_dir == "out" else "in"
    return Neighbor(
        id=parsed, depth=depth, seed_id=seed,
        relation=Relation(
            type=str(rel_type), direction=direction, depth=depth, source_id=source_id,
            note=_opt_str(note), status=_opt_str(status), role=_opt_str(role),
            confidence=float(confidence or 0.0) or None, evidence_id=_uuid(evidence_id)))
