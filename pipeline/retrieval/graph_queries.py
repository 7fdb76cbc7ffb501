"""Graph-backed reads: entity find, link find, expansion around one or many objects.

The graph only proposes ids; every hit is hydrated from Postgres under the caller's namespace
before anyone sees it, so a lagging graph can never show a deleted or foreign object. When the
graph is down, expansion answers containment only and says so (`degrade: graph_unavailable`),
and entity find falls back to the Postgres channels.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from pipeline.domain.errors import GraphUnavailable, InvalidInput, NotFound, Unavailable
from pipeline.domain.read_model import (
    MAX_HOPS,
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
from pipeline.ports import CatalogSource, GraphReader, ObjectReader, QueryEmbedder
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
    candidate_k: int = 50  # entity candidates per channel (text, vector)
    rrf_k: int = 60
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
    return True


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
    return out


class GraphQueries:
    """find_objects, find_links, expand and expand_many.

    `graph` proposes ids (None: no graph, every answer degrades); `reader` hydrates them under
    the namespace and `pager` pages the answers; `catalog` checks filters; `embed_query` (None:
    text only) embeds entity queries; `fallback` answers entity find when the graph cannot.
    """

    def __init__(self, graph: GraphReader | None, *, reader: ObjectReader, pager: ResultPager,
                 catalog: CatalogSource, embed_query: QueryEmbedder | None,
                 fallback: FallbackSearch, config: GraphConfig | None = None) -> None:
        self.graph = graph
        self.reader = reader
        self.pager = pager
        self.catalog = catalog
        self.embed_query = embed_query
        self.fallback = fallback
        self.config = config or GraphConfig()

    # -- entity and link find ---------------------------------------------------------------

    async def find_objects(self, namespace: uuid.UUID, query: str, kinds: Sequence[str],
                           filters: Filters, limit: int) -> Page:
        """Graph full-text + vector entity search, fused by RRF, hydrated and filtered."""
        text = query_text(query, max_terms=self.config.max_query_terms)
        check_limit(limit)
        merged = Filters(**{**asdict(filters), "kinds": tuple(kinds) or filters.kinds})
        check_filters(await self.catalog(), merged, max_filters=self.config.max_filters)
        if self.graph is None:
            return await self._fallback_objects(namespace, text, merged, limit)
        k = self.config.candidate_k
        try:
            channels: dict[str, list[Hit]] = {
                "text": await self.graph.find_entities_text(namespace, text, merged.kinds, k)}
            degrade = None
            if self.embed_query is not None:
                try:
                    vector = await asyncio.wait_for(self.embed_query(text),
                                                    self.config.embed_timeout)
                    channels["vector"] = await self.graph.find_entities_vector(
                        namespace, vector, merged.kinds, k)
                except (TimeoutError, Unavailable) as exc:
                    if isinstance(exc, GraphUnavailable):
                        raise
                    degrade = "text_only"
        except Unavailable as exc:
            log.warning("graph unavailable for find_objects: %s", exc)
            return await self._fallback_objects(namespace, text, merged, limit)
        fused = rrf(channels, k=self.config.rrf_k)
        hydrated = await self.reader.hydrate(namespace, [f.id for f in fused])
        items: list[Item] = [{"id": str(f.id), "score": f.score, "evidence": []} for f in fused
                             if f.id in hydrated and hydrated[f.id].parent_id is None
                             and matches(hydrated[f.id], merged)]
        return await self.pager.first_page(namespace, items, limit, kind="find_objects",
                                           degrade=degrade, hydrated=hydrated)

    async def _fallback_objects(self, namespace: uuid.UUID, text: str, filters: Filters,
                                limit: int) -> Page:
        page = await self.fallback(namespace, SearchQuery(text, filters, limit))
        return Page(page.objects, page.result_set_id, page.has_more, degrade=GRAPH_UNAVAILABLE)

    async def find_links(self, namespace: uuid.UUID, relation_type: str, query: str,
                         limit: int) -> Page:
        """Edge-note text search on one relation type; each hit is the target object with its
        relation (the source is `relation.source_id`); hits with a hidden endpoint are dropped."""
        check_relation_type(relation_type)
        text = query_text(query, max_terms=self.config.max_query_terms)
        check_limit(limit)
        if self.graph is None:
            raise GraphUnavailable("the graph is not configured")
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
                                evidence_id=edge.evidence_id)
            items.append({"id": str(edge.to_id), "score": edge.score, "evidence": [],
                          "relation": _relation_dict(relation)})
        return await self.pager.first_page(namespace, items, limit, kind="find_links",
                                           hydrated=hydrated)

    # -- expansion ----------------------------------------------------------------------------

    async def expand(self, namespace: uuid.UUID, request: ExpandQuery) -> Page:
        """Containment and/or graph neighbors of one object, paged."""
        if len(request.object_ids) != 1:
            raise InvalidInput("expand takes exactly one object_id", field="object_id")
        return await self._expand(namespace, request, budget=request.limit)

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
        containment_kinds: set[str] = set()
        if request.want_containment:
            for seed_id in request.object_ids:
                for obj, relation in await self._containment(namespace, seeds[seed_id]):
                    if obj.id not in seen:
                        seen.add(obj.id)
                        containment_kinds.add("children" if relation.type == "contains"
                                              else "neighborhood")
                        items.append({"id": str(obj.id), "score": 1.0, "evidence": [],
                                      "relation": _relation_dict(relation)})
        degrade = None
        graph_items: list[Item] = []
        if self.graph is not None:
            graph_seeds = list(dict.fromkeys(seeds[i].parent_id or i
                                             for i in request.object_ids))
            try:
                neighbors = await self.graph.neighbors(
                    namespace, graph_seeds, list(request.relation_types), request.direction,
                    request.max_hops, budget)
                graph_items = await self._neighbor_items(namespace, neighbors, seen)
            except Unavailable as exc:
                log.warning("graph unavailable for expand: %s", exc)
                degrade = GRAPH_UNAVAILABLE
        else:
            degrade = GRAPH_UNAVAILABLE
        items += graph_items[:budget]
        mode = _mode(containment_kinds, bool(graph_items))
        return await self.pager.first_page(namespace, items, request.limit, kind="expand",
                                           degrade=degrade, mode=mode)

    async def _containment(self, namespace: uuid.UUID, obj: RichObject
                           ) -> list[tuple[RichObject, Relation]]:
        reader = self.reader
        if obj.parent_id is None:
            children = await reader.children(namespace, obj.id, limit=self.config.max_children)
            return [(c, Relation(type="contains", direction="out", depth=1, source_id=obj.id))
                    for c in children]
        parent = (await reader.hydrate(namespace, [obj.parent_id])).get(obj.parent_id)
        out: list[tuple[RichObject, Relation]] = []
        if parent is not None:
            out.append((parent, Relation(type="part_of", direction="out", depth=1,
                                         source_id=obj.id)))
        siblings = await reader.siblings(namespace, obj.id, radius=self.config.sibling_radius)
        out += [(s, Relation(type="sibling", direction=None, depth=1, source_id=obj.id))
                for s in siblings]
        return out

    async def _neighbor_items(self, namespace: uuid.UUID, neighbors: Sequence[Neighbor],
                              seen: set[uuid.UUID]) -> list[Item]:
        hydrated = await self.reader.hydrate(namespace, [n.id for n in neighbors])
        items = []
        for n in neighbors:
            if n.id in seen or n.id not in hydrated:
                continue
            seen.add(n.id)
            items.append({"id": str(n.id), "score": 1.0 / n.depth, "evidence": [],
                          "relation": _relation_dict(n.relation)})
        return items


def _mode(containment: set[str], graph: bool) -> str:
    if containment and graph:
        return "mixed"
    if graph:
        return "graph"
    if "neighborhood" in containment:
        return "neighborhood"
    return "children"
