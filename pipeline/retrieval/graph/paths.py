"""`POST /v1/paths`: the k best paths between objects and entities over the mixed graph.

A bounded bidirectional breadth-first search over Postgres (the truth, and the holder of every
edge's evidence; `PathGraph` port): each round expands one whole layer of the side with the
smaller frontier, one store call per layer. When the source side has expanded its nodes up to
depth `da` and the target side up to `db`, every path of at most `da + db` hops is among the
edges seen (its first `da` edges were fetched from the source side, the rest from the target
side), so the search stops as soon as `da + db` reaches `max_hops`, or earlier once k paths no
longer than `da + db` are known (longer ones rank below them). A side whose frontier empties has
seen its whole component. Paths are then enumerated in the explored subgraph, shortest first,
strongest first within a length (pipeline/domain/paths.py: `edge_strength`).

Bounds: explored nodes, fetched edges, a deadline, and an enumeration cap; hubs (entities named
in too many rows) are reached but not expanded. A bound that cut the search is named in the
answer (`search_incomplete`, `cut_by`), and when no path fits in `max_hops` the search goes on
a few hops (`beyond_hops`) to tell `connected_beyond_max_length` from `not_connected`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from pipeline.domain.errors import InvalidInput, NotFound
from pipeline.domain.paths import (
    CUT_DEADLINE,
    CUT_HUBS,
    CUT_MAX_EDGES,
    CUT_MAX_NODES,
    CUT_PATH_CAP,
    MAX_PATH_HOPS,
    FoundPath,
    GraphEdge,
    Hub,
    NodeRef,
    PathAnswer,
    PathQuery,
    PathStep,
    Status,
    edge_strength,
)
from pipeline.ports import PathGraph

Adjacency = dict[NodeRef, dict[NodeRef, GraphEdge]]


@dataclass(frozen=True)
class PathConfig:
    """The search's bounds (settings `PATHS_*`, docs/entities.md)."""

    max_hops: int = MAX_PATH_HOPS
    max_k: int = 20
    max_endpoints: int = 50
    max_nodes: int = 5000
    max_edges: int = 20000
    deadline: float = 5.0
    hub_fraction: float = 0.1
    hub_min_parts: int = 20
    beyond_hops: int = 4
    max_paths: int = 2000
    evidence_per_edge: int = 3


@dataclass
class _Side:
    """One end of the bidirectional search: BFS distances, the next layer, its depth."""

    dist: dict[NodeRef, int]
    frontier: list[NodeRef]
    depth: int = 0
    skipped_hubs: bool = False

    @property
    def stuck(self) -> bool:
        """Nothing left to expand on this side."""
        return not self.frontier

    @property
    def exhausted(self) -> bool:
        """This side has seen its whole component: nothing left, and no hub left unexpanded."""
        return not self.frontier and not self.skipped_hubs


@dataclass
class _Explored:
    """The subgraph seen so far: the strongest edge between each two nodes, both ways."""

    adjacency: Adjacency = field(default_factory=dict)
    keys: set[tuple[NodeRef, NodeRef, str, str]] = field(default_factory=set)

    def add(self, edge: GraphEdge) -> None:
        self.keys.add(edge.key)
        for here, there in ((edge.a, edge.b), (edge.b, edge.a)):
            known = self.adjacency.setdefault(here, {}).get(there)
            if known is None or edge_strength(edge) > edge_strength(known):
                self.adjacency[here][there] = edge


class PathFinder:
    """Finds, ranks and cites the paths of one request (see the module's docstring)."""

    def __init__(self, graph: PathGraph, config: PathConfig | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.graph = graph
        self.config = config or PathConfig()
        self.clock = clock

    async def find(self, namespace: uuid.UUID, query: PathQuery) -> PathAnswer:
        """The k best paths from any source to any target, with their evidence, and how the
        search ended; 4xx errors name the field (`from`, `to`, `max_hops`, `k`). With
        `query.at`, the links are those that held then (as known then)."""
        if query.at is not None:
            finder = PathFinder(self.graph.as_of(query.at), self.config, clock=self.clock)
            return await finder.find(namespace, replace(query, at=None))
        self._check(query)
        sources = await self._endpoints(namespace, query.sources, "from")
        targets = await self._endpoints(namespace, query.targets, "to")
        if sources & targets:
            raise InvalidInput("from and to name the same node", field="to")
        search = _Search(self.graph, namespace, self.config, sources, targets,
                         deadline=self.clock() + self.config.deadline, clock=self.clock)
        await search.run(query.max_hops, query.k)
        paths, capped = enumerate_paths(search.explored.adjacency, sources, targets,
                                        query.max_hops, query.k, self.config.max_paths)
        beyond = None
        if not paths and not search.cut and not search.exhausted:
            met = await search.probe(query.max_hops + self.config.beyond_hops)
            if met is not None and met <= query.max_hops:
                # only when a hub held one side back: the probe reached the hub from the
                # other side, and the path through it fits after all
                paths, capped = enumerate_paths(search.explored.adjacency, sources, targets,
                                                query.max_hops, query.k, self.config.max_paths)
            else:
                beyond = met
        if capped:
            search.cut.add(CUT_PATH_CAP)
        return await self._answer(namespace, search, paths[:query.k], beyond)

    def _check(self, query: PathQuery) -> None:
        config = self.config
        if not 1 <= query.max_hops <= config.max_hops:
            raise InvalidInput(f"max_hops must be 1..{config.max_hops}", field="max_hops")
        if not 1 <= query.k <= config.max_k:
            raise InvalidInput(f"k must be 1..{config.max_k}", field="k")
        for name, ids in (("from", query.sources), ("to", query.targets)):
            if not 1 <= len(ids) <= config.max_endpoints:
                raise InvalidInput(f"{name} takes 1 to {config.max_endpoints} ids", field=name)

    async def _endpoints(self, namespace: uuid.UUID, ids: Iterable[uuid.UUID], name: str
                         ) -> frozenset[NodeRef]:
        wanted = list(dict.fromkeys(ids))
        found = await self.graph.endpoints(namespace, wanted)
        out: set[NodeRef] = set()
        for i, node_id in enumerate(wanted):
            ref = found.get(node_id)
            if ref is None:
                raise NotFound(f"no object or entity {node_id}", field=f"{name}[{i}]")
            if isinstance(ref, str):
                raise InvalidInput(f"{node_id} is a part: name its object", field=f"{name}[{i}]")
            out.add(ref)
        return frozenset(out)

    async def _answer(self, namespace: uuid.UUID, search: _Search, chosen: list[FoundPath],
                      beyond: int | None) -> PathAnswer:
        edges = list({s.edge.key: s.edge for p in chosen for s in p.steps}.values())
        cites = await self.graph.citations(namespace, edges, self.config.evidence_per_edge)
        paths = tuple(
            FoundPath(p.nodes, tuple(PathStep(s.edge, s.forward, s.strength,
                                              tuple(cites.get(s.edge.key, ())))
                                     for s in p.steps), p.strength)
            for p in chosen)
        nodes = await self.graph.nodes(namespace, sorted({n for p in paths for n in p.nodes}))
        cut = set(search.cut)
        status: Status
        if paths:
            status = "found"
        elif cut:
            status = "search_incomplete"
        elif beyond is not None:
            status = "connected_beyond_max_length"
        elif search.exhausted:
            status = "not_connected"
        elif search.hubs:
            status = "search_incomplete"  # a path might run through a hub left unexpanded
            cut.add(CUT_HUBS)
        else:
            status = "no_path_within_max_length"
        return PathAnswer(paths=paths, nodes=nodes, status=status,
                          search_incomplete=bool(cut), cut_by=tuple(sorted(cut)),
                          hubs_skipped=tuple(sorted(search.hubs.values(), key=lambda h: h.id)),
                          shortest_beyond=beyond,
                          explored_nodes=len(search.explored.adjacency),
                          explored_edges=len(search.explored.keys))


class _Search:
    """The bounded bidirectional BFS of one request."""

    def __init__(self, graph: PathGraph, namespace: uuid.UUID, config: PathConfig,
                 sources: frozenset[NodeRef], targets: frozenset[NodeRef], *,
                 deadline: float, clock: Callable[[], float]) -> None:
        self.graph = graph
        self.namespace = namespace
        self.config = config
        self.endpoints = sources | targets
        # Conversations are walked only from or to a message: document-only answers stay as
        # they were in a namespace with conversations.
        self.messages = any(n.type == "message" for n in self.endpoints)
        self.sources, self.targets = sources, targets
        self.src = _Side({n: 0 for n in sources}, sorted(sources))
        self.dst = _Side({n: 0 for n in targets}, sorted(targets))
        self.explored = _Explored()
        self.cut: set[str] = set()
        self.hubs: dict[uuid.UUID, Hub] = {}
        self.deadline = deadline
        self.clock = clock

    @property
    def exhausted(self) -> bool:
        """One side has seen its whole component (hubs aside)."""
        return self.src.exhausted or self.dst.exhausted

    async def run(self, max_hops: int, k: int) -> None:
        """Expand until every path of at most `max_hops` is among the edges seen, k paths no
        longer than the covered length are known, or a bound cuts the search."""
        while not self.cut and not self.exhausted and not self._stuck:
            covered = self.src.depth + self.dst.depth
            if covered >= max_hops:
                return
            if covered and len(enumerate_paths(self.explored.adjacency, self.sources,
                                               self.targets, covered, k,
                                               self.config.max_paths)[0]) >= k:
                return
            await self._step()

    async def probe(self, max_length: int) -> int | None:
        """Go on past `max_hops` until the sides meet (the length they met at), one side is
        exhausted, `max_length` is covered or a bound stops it (None). The probe's own cuts
        are not the answer's: the search within `max_hops` was complete."""
        cut_before = set(self.cut)
        try:
            while True:
                met = self._met()
                if met is not None:
                    return met
                if (self.cut or self.exhausted or self._stuck
                        or self.src.depth + self.dst.depth >= max_length):
                    return None
                await self._step()
        finally:
            self.cut = cut_before

    @property
    def _stuck(self) -> bool:
        return self.src.stuck and self.dst.stuck

    def _met(self) -> int | None:
        small, large = sorted((self.src.dist, self.dst.dist), key=len)
        lengths = [d + large[n] for n, d in small.items() if n in large]
        return min(lengths) if lengths else None

    async def _step(self) -> None:
        """Expand the whole frontier of the side with the smaller one by one layer."""
        if self.clock() > self.deadline:
            self.cut.add(CUT_DEADLINE)
            return
        side = min((s for s in (self.src, self.dst) if not s.stuck),
                   key=lambda s: (len(s.frontier), s is self.dst))
        frontier = await self._expandable(side.frontier)
        side.skipped_hubs = side.skipped_hubs or len(frontier) < len(side.frontier)
        remaining = self.config.max_edges - len(self.explored.keys)
        edges = (await self.graph.edges(self.namespace, frontier, remaining + 1,
                                        messages=self.messages) if frontier else [])
        if len(edges) > remaining:
            self.cut.add(CUT_MAX_EDGES)
            edges = edges[:remaining]
        layer: list[NodeRef] = []
        for edge in edges:
            self.explored.add(edge)
            for end in (edge.a, edge.b):
                if end not in side.dist:
                    side.dist[end] = side.depth + 1
                    layer.append(end)
        if len(self.explored.adjacency) > self.config.max_nodes:
            self.cut.add(CUT_MAX_NODES)
        side.frontier = sorted(layer)
        side.depth += 1

    async def _expandable(self, frontier: list[NodeRef]) -> list[NodeRef]:
        """The frontier without its hubs (an endpoint is always expanded)."""
        candidates = [n.id for n in frontier if n.type == "entity" and n not in self.endpoints]
        if not candidates:
            return frontier
        hubs = await self.graph.hubs(self.namespace, candidates,
                                     fraction=self.config.hub_fraction,
                                     min_parts=self.config.hub_min_parts)
        self.hubs.update((h.id, h) for h in hubs)
        skipped = {h.id for h in hubs}
        return [n for n in frontier if not (n.type == "entity" and n.id in skipped)]


def enumerate_paths(adjacency: Adjacency, sources: Iterable[NodeRef],
                    targets: frozenset[NodeRef], max_hops: int, k: int, max_paths: int
                    ) -> tuple[list[FoundPath], bool]:
    """The simple paths of at most `max_hops` from a source to a target in `adjacency`,
    ranked (fewest hops, then strongest, then by node ids); a path ends at the first target it
    reaches. Lengths are enumerated shortest first and stop once k paths are known; at most
    `max_paths` are enumerated (then the flag is True and the ranking covers those only)."""
    to_target = _distances(adjacency, targets, max_hops)
    found: list[FoundPath] = []
    capped = False
    starts = sorted(sources)
    strengths: dict[GraphEdge, float] = {}

    def strength_of(edge: GraphEdge) -> float:
        if edge not in strengths:
            strengths[edge] = edge_strength(edge)
        return strengths[edge]

    ranked: dict[tuple[NodeRef, int], list[tuple[NodeRef, GraphEdge]]] = {}

    def options(node: NodeRef, left: int) -> list[tuple[NodeRef, GraphEdge]]:
        """The neighbours that can still reach a target in `left` hops, strongest first
        (kept: a node is walked through by many partial paths)."""
        if (node, left) not in ranked:
            near = [(there, edge) for there, edge in adjacency.get(node, {}).items()
                    if to_target.get(there, max_hops + 1) <= left]
            near.sort(key=lambda item: (-strength_of(item[1]), item[0].id))
            ranked[(node, left)] = near
        return ranked[(node, left)]

    def walk(node: NodeRef, nodes: list[NodeRef], steps: list[PathStep], length: int,
             strength: float) -> None:
        nonlocal capped
        if len(steps) == length:
            if node in targets:
                found.append(FoundPath(tuple(nodes), tuple(steps), strength))
                capped = capped or len(found) >= max_paths
            return
        if steps and node in targets:
            return
        for there, edge in options(node, length - len(steps) - 1):
            if capped:
                return
            if there in nodes:
                continue
            step = PathStep(edge, forward=edge.a == node, strength=strength_of(edge))
            walk(there, [*nodes, there], [*steps, step], length, strength * step.strength)

    for length in range(1, max_hops + 1):
        for start in starts:
            walk(start, [start], [], length, 1.0)
        if len(found) >= k or capped:
            break
    found.sort(key=lambda p: (p.hops, -p.strength, p.nodes))
    return found, capped


def _distances(adjacency: Adjacency, starts: Iterable[NodeRef], limit: int
               ) -> dict[NodeRef, int]:
    """Hop distances from `starts` in `adjacency`, up to `limit`."""
    dist = {n: 0 for n in starts}
    layer = list(dist)
    for depth in range(1, limit + 1):
        nxt = [m for n in layer for m in adjacency.get(n, {}) if m not in dist]
        for m in nxt:
            dist.setdefault(m, depth)
        layer = [m for m in dict.fromkeys(nxt)]
    return dist
