"""Graph-backed reads: entity find, link find, expansion around one or many objects.

The graph only proposes ids; every hit is hydrated from Postgres under the caller's namespace
before anyone sees it, so a lagging graph can never show a deleted or foreign object. When the
graph is down, expansion answers containment only and says so (`degrade: graph_unavailable`),
and entity find falls back to the Postgres channels. An as-of read (`AsOf`: a world and/or a
system time) answers the link part from the link versions in Postgres instead of the graph,
which holds the current state only.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

from pipeline.domain.conditions import matches as matches_condition
from pipeline.domain.errors import GraphUnavailable, InvalidInput, NotFound, Unavailable
from pipeline.domain.read_model import (
    MAX_HOPS,
    AsOf,
    ExpandQuery,
    Filters,
    Hit,
    Neighbor,
    Page,
    Relation,
    RichObject,
    SearchQuery,
)
from pipeline.domain.relations import check_relation_type
from pipeline.ports import (
    CatalogSource,
    GraphReader,
    LinkVersionReader,
    ObjectReader,
    QueryEmbedder,
)
from pipeline.retrieval.fusion import rrf
from pipeline.retrieval.paging import Item, ResultPager
from pipeline.retrieval.requests import (
    MAX_FILTERS,
    MAX_QUERY_TERMS,
    check_filters,
    check_limit,
    query_text,
)

# The hybrid search entity find falls back to when the graph cannot answer.
FallbackSearch = Callable[[uuid.UUID, SearchQuery], Awaitable[Page]]

log = logging.getLogger(__name__)

GRAPH_UNAVAILABLE = "graph_unavailable"
MAX_SEEDS = 100


@dataclass(frozen=True)
class GraphConfig:
    sibling_radius: int = 2
    max_children: int = 500
    max_neighbors: int = 500
    candidate_k: int = 50  # entity candidates per channel (text, vector), first round
    max_candidates: int = 1000  # per channel, when filters leave the page short
    rrf_k: int = 10
    max_results: int = 100  # edge hits of find_links
    embed_timeout: float = 5.0
    max_query_terms: int = MAX_QUERY_TERMS
    max_filters: int = MAX_FILTERS


def matches(obj: RichObject, filters: Filters) -> bool:
    """Whether a hydrated object satisfies the filters (for graph hits, filtered after)."""
    if filters.kinds and obj.kind not in filters.kinds:
        return False
    if filters.title and (obj.title is None or filters.title.lower() not in obj.title.lower()):
        return False
    for bound, value, after in ((filters.created_after, obj.created_at, True),
                                (filters.created_before, obj.created_at, False),
                                (filters.updated_after, obj.updated_at, True),
                                (filters.updated_before, obj.updated_at, False)):
        if bound is not None and not _in_range(value, bound, after):
            return False
    for name, accepted in filters.properties:
        have = obj.properties.get(name)
        values = have if isinstance(have, list) else [have]
        if not any((v == a and type(v) is type(a)) or _num_eq(v, a)
                   for v in values for a in accepted):
            return False
    return filters.where is None or matches_condition(filters.where, obj.properties)


def _in_range(value: datetime, bound: datetime, after: bool) -> bool:
    return value >= bound if after else value < bound


def _num_eq(a: object, b: object) -> bool:
    numeric = (int, float)
    return (isinstance(a, numeric) and isinstance(b, numeric) and not isinstance(a, bool)
            and not isinstance(b, bool) and float(a) == float(b))


def _relation_dict(relation: Relation) -> dict[str, Any]:
    out = asdict(relation)
    for key in ("source_id", "evidence_id"):
        if out.get(key) is not None:
            out[key] = str(out[key])
    for key in ("valid_from", "valid_to"):  # only an as-of read knows them
        out[key] = out[key].isoformat() if out[key] is not None else None
        if out[key] is None:
            del out[key]
    return out


class GraphQueries:
    """find_objects, find_links, expand and expand_many.

    `graph` proposes ids (None: no graph, every answer degrades); `reader` hydrates them under
    the namespace and `pager` pages the answers; `catalog` checks filters; `embed_query` (None:
    text only) embeds entity queries; `fallback` answers entity find when the graph cannot;
    `history` (None: as-of reads refused) answers the as-of reads.
    """

    def __init__(self, graph: GraphReader | None, *, reader: ObjectReader, pager: ResultPager,
                 catalog: CatalogSource, embed_query: QueryEmbedder | None,
                 fallback: FallbackSearch, config: GraphConfig | None = None,
                 history: LinkVersionReader | None = None) -> None:
        self.graph = graph
        self.history = history
        self.reader = reader
        self.pager = pager
        self.catalog = catalog
        self.embed_query = embed_query
        self.fallback = fallback
        self.config = config or GraphConfig()

    # -- entity and link find ---------------------------------------------------------------

    async def find_objects(self, namespace: uuid.UUID, query: str, kinds: Sequence[str],
                           filters: Filters, limit: int) -> Page:
        """Graph full-text + vector entity search, fused by RRF, hydrated and filtered.

        Filters other than kinds apply after hydration, so a round whose candidates they mostly
        refuse leaves the page short: the channels are asked again for four times as many until
        the page is full (one more than `limit`, so `has_more` is known), every channel is
        exhausted, or `max_candidates` per channel were examined; in the last case the page
        says `truncated` (matches may exist beyond the candidates examined).
        """
        text = query_text(query, max_terms=self.config.max_query_terms)
        check_limit(limit)
        merged = replace(filters, kinds=tuple(kinds) or filters.kinds)
        check_filters(await self.catalog(), merged, max_filters=self.config.max_filters)
        if self.graph is None:
            return await self._fallback_objects(namespace, text, merged, limit)
        k = min(self.config.candidate_k, self.config.max_candidates)
        vector, degrade = await self._query_vector(text)
        try:
            while True:
                channels = await _entity_channels(self.graph, namespace, text, vector,
                                                  merged.kinds, k)
                fused = rrf(channels, k=self.config.rrf_k)
                hydrated = await self.reader.hydrate(namespace, [f.id for f in fused])
                items: list[Item] = [
                    {"id": str(f.id), "score": f.score, "evidence": []} for f in fused
                    if f.id in hydrated and hydrated[f.id].parent_id is None
                    and matches(hydrated[f.id], merged)]
                # A channel that gave fewer than k holds no more (the reader guarantees it).
                exhausted = all(len(hits) < k for hits in channels.values())
                truncated = k >= self.config.max_candidates and not exhausted
                if len(items) > limit or exhausted or truncated:
                    break
                k = min(k * 4, self.config.max_candidates)
        except GraphUnavailable as exc:  # Postgres down is not a graph outage: a 503, not 200
            log.warning("graph unavailable for find_objects: %s", exc)
            return await self._fallback_objects(namespace, text, merged, limit)
        return await self.pager.first_page(namespace, items, limit, kind="find_objects",
                                           degrade=degrade, hydrated=hydrated,
                                           truncated=truncated and len(items) <= limit)

    async def _query_vector(self, text: str) -> tuple[Sequence[float] | None, str | None]:
        """The query's embedding, or None and why not (`text_only`; none without embedder)."""
        if self.embed_query is None:
            return None, None
        try:
            return await asyncio.wait_for(self.embed_query(text), self.config.embed_timeout), None
        except (TimeoutError, Unavailable):
            return None, "text_only"

    async def _fallback_objects(self, namespace: uuid.UUID, text: str, filters: Filters,
                                limit: int) -> Page:
        page = await self.fallback(namespace, SearchQuery(text, filters, limit))
        return replace(page, degrade=GRAPH_UNAVAILABLE)  # keeps `truncated` and the set id

    async def find_links(self, namespace: uuid.UUID, relation_type: str, query: str,
                         limit: int, at: AsOf | None = None) -> Page:
        """Edge-note text search on one relation type; each hit is the target object with its
        relation (the source is `relation.source_id`); hits with a hidden endpoint are dropped.
        With `at`, the links counting then (their versions' notes), with their validity."""
        check_relation_type(relation_type)
        text = query_text(query, max_terms=self.config.max_query_terms)
        check_limit(limit)
        if at is not None:
            edges = await self._history().find_edges(namespace, relation_type, text,
                                                     self.config.max_results, at)
        elif self.graph is None:
            raise GraphUnavailable("the graph is not configured")
        else:
            edges = await self.graph.find_edges(namespace, relation_type, text,
                                                self.config.max_results)
        ends = {e.from_id for e in edges} | {e.to_id for e in edges}
        hydrated = await self.reader.hydrate(namespace, sorted(ends))
        items: list[Item] = []
        for edge in edges:
            if edge.from_id not in hydrated or edge.to_id not in hydrated:
                continue
            relation = Relation(type=edge.relation_type, direction="out", depth=1,
                                source_id=edge.from_id, note=edge.note, status=edge.status,
                                role=edge.role, confidence=edge.confidence,
                                evidence_id=edge.evidence_id, valid_from=edge.valid_from,
                                valid_to=edge.valid_to)
            items.append({"id": str(edge.to_id), "score": edge.score, "evidence": [],
                          "relation": _relation_dict(relation)})
        return await self.pager.first_page(namespace, items, limit, kind="find_links",
                                           hydrated=hydrated)

    # -- expansion ----------------------------------------------------------------------------

    async def expand(self, namespace: uuid.UUID, request: ExpandQuery) -> Page:
        """Containment and/or graph neighbors of one object (up to `max_neighbors`), paged by
        `limit` like every ranked read: more than a page gives a result set to continue."""
        if len(request.object_ids) != 1:
            raise InvalidInput("expand takes exactly one object_id", field="object_id")
        return await self._expand(namespace, request, budget=self.config.max_neighbors)

    async def expand_many(self, namespace: uuid.UUID, request: ExpandQuery) -> Page:
        """Neighbors of several landing objects within a neighbor budget; the first seed to
        reach a neighbor claims it."""
        if not 1 <= len(request.object_ids) <= MAX_SEEDS:
            raise InvalidInput(f"object_ids takes 1 to {MAX_SEEDS} ids", field="object_ids")
        budget = request.neighbor_budget or self.config.max_neighbors
        if not 1 <= budget <= self.config.max_neighbors:
            raise InvalidInput(f"neighbor_budget must be 1..{self.config.max_neighbors}",
                               field="neighbor_budget")
        return await self._expand(namespace, request, budget=budget)

    async def _expand(self, namespace: uuid.UUID, request: ExpandQuery, *, budget: int
                      ) -> Page:
        """The expansion's items; `truncated` when the containment or the neighbour bound
        (`budget`) left some out (each is asked for one more than it may give, to know)."""
        check_limit(request.limit)
        if not 1 <= request.max_hops <= MAX_HOPS:
            raise InvalidInput(f"max_hops must be 1..{MAX_HOPS}", field="max_hops")
        for relation_type in request.relation_types:
            check_relation_type(relation_type)
        seeds = await self.reader.hydrate(namespace, list(request.object_ids))
        missing = [i for i in request.object_ids if i not in seeds]
        if missing:
            raise NotFound(f"object {missing[0]} not found", field="object_id")
        items: list[Item] = []
        seen: set[uuid.UUID] = set(request.object_ids)
        read: dict[uuid.UUID, RichObject] = {}  # what the page shows, read once
        containment_kinds: set[str] = set()
        truncated = False
        if request.want_containment:
            for seed_id in request.object_ids:
                contained, cut = await self._containment(namespace, seeds[seed_id])
                truncated = truncated or cut
                for obj, relation in contained:
                    if obj.id not in seen:
                        seen.add(obj.id)
                        read[obj.id] = obj
                        containment_kinds.add("children" if relation.type == "contains"
                                              else "neighborhood")
                        items.append({"id": str(obj.id), "score": 1.0, "evidence": [],
                                      "relation": _relation_dict(relation)})
        degrade = None
        graph_items: list[Item] = []
        graph_seeds = list(dict.fromkeys(seeds[i].parent_id or i for i in request.object_ids))
        walk = (request.relation_types, request.direction, request.max_hops, budget + 1)
        if request.at is not None:  # as of a time: the link versions, not the graph
            neighbors = await self._history().neighbors(namespace, graph_seeds, *walk,
                                                        request.at)
            truncated = truncated or len(neighbors) > budget
            graph_items = await self._neighbor_items(namespace, neighbors[:budget], seen, read)
        elif self.graph is not None:
            try:
                neighbors = await self.graph.neighbors(namespace, graph_seeds, *walk)
                truncated = truncated or len(neighbors) > budget
                graph_items = await self._neighbor_items(namespace, neighbors[:budget], seen,
                                                         read)
            except GraphUnavailable as exc:  # (hydrating from Postgres is not the graph)
                log.warning("graph unavailable for expand: %s", exc)
                degrade = GRAPH_UNAVAILABLE
        else:
            degrade = GRAPH_UNAVAILABLE
        items += graph_items
        mode = _mode(containment_kinds, bool(graph_items))
        return await self.pager.first_page(namespace, items, request.limit, kind="expand",
                                           degrade=degrade, mode=mode, truncated=truncated,
                                           hydrated=read)

    def _history(self) -> LinkVersionReader:
        if self.history is None:
            raise Unavailable("as-of reads are not configured (no link version reader)")
        return self.history

    async def _containment(self, namespace: uuid.UUID, obj: RichObject
                           ) -> tuple[list[tuple[RichObject, Relation]], bool]:
        """The object's children (a parent) or its parent and nearby siblings (a part), and
        whether `max_children` cut the children."""
        reader = self.reader
        if obj.parent_id is None:
            bound = self.config.max_children
            children = await reader.children(namespace, obj.id, limit=bound + 1,
                                             with_content=False)  # an answer shows no content
            return [(c, Relation(type="contains", direction="out", depth=1, source_id=obj.id))
                    for c in children[:bound]], len(children) > bound
        parent = (await reader.hydrate(namespace, [obj.parent_id])).get(obj.parent_id)
        out: list[tuple[RichObject, Relation]] = []
        if parent is not None:
            out.append((parent, Relation(type="part_of", direction="out", depth=1,
                                         source_id=obj.id)))
        siblings = await reader.siblings(namespace, obj.id, radius=self.config.sibling_radius,
                                         with_content=False)
        out += [(s, Relation(type="sibling", direction=None, depth=1, source_id=obj.id))
                for s in siblings]
        return out, False

    async def _neighbor_items(self, namespace: uuid.UUID, neighbors: Sequence[Neighbor],
                              seen: set[uuid.UUID], read: dict[uuid.UUID, RichObject]
                              ) -> list[Item]:
        """The neighbours still visible, each once, as items (their objects added to `read`)."""
        hydrated = await self.reader.hydrate(namespace, [n.id for n in neighbors])
        items = []
        for n in neighbors:
            if n.id in seen or n.id not in hydrated:
                continue
            seen.add(n.id)
            read[n.id] = hydrated[n.id]
            items.append({"id": str(n.id), "score": 1.0 / n.depth, "evidence": [],
                          "relation": _relation_dict(n.relation)})
        return items


async def _entity_channels(graph: GraphReader, namespace: uuid.UUID, text: str,
                           vector: Sequence[float] | None, kinds: Sequence[str], k: int
                           ) -> dict[str, list[Hit]]:
    """The top k candidates of each entity channel (text, and vector when embedded)."""
    channels = {"text": await graph.find_entities_text(namespace, text, kinds, k)}
    if vector is not None:
        channels["vector"] = await graph.find_entities_vector(namespace, vector, kinds, k)
    return channels


def _mode(containment: set[str], graph: bool) -> str:
    if containment and graph:
        return "mixed"
    if graph:
        return "graph"
    if "neighborhood" in containment:
        return "neighborhood"
    return "children"
