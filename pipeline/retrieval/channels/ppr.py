"""The PPR stage: Personalized PageRank over a query-time subgraph of the entity layer.

1. Seeds (`plan`): the query's word n-grams (up to `max_ngram` words) matched to the
   namespace's entities by normalised name, then alias, then fold as a fallback (a lower-case
   single word never matches a capitalised name: `seeds.common_word_match`); overlapping
   matches keep the longest. A seed weighs 1 / (live rows naming it). An entity named by more
   than `hub_fraction` of the namespace's live rows (and by more than `hub_min_rows`, so a
   small namespace still has seeds) is a hub: never a seed, never expanded.
2. Subgraph (`walk`): entities and rows, joined by mentions (entity - row) and by walkable
   entity edges; at most `max_hops` hops from the seeds, at most `max_nodes` nodes and
   `max_edges` edges (`truncated` when a bound cut it). From the second hop on, only the
   `frontier` unexpanded nodes with the highest forward-push estimate are expanded. An
   expanded entity brings at most `rows_per_entity` rows, fewer when the nodes left under
   `max_nodes` are shared by the hop's entities. The hops are read from the namespace's
   in-memory snapshot when it is fresh (`PprSnapshots`, no SQL), else one statement per hop
   (`EntityGraph.hop`); both answer the same (`PprResult.source` says which).
3. PPR (`rank`): power iteration with damping `damping`, dangling mass back to the seeds,
   stopped once the top `stable_k` rows stay put; rows promoted to their objects (an object
   scores its best row; `PprResult.mass` also gives the sum of its rows), kept only when the
   request's filters and scope allow them.

Optionally the first stage's best rows join as weak seeds (`passage_seed_weight` > 0, shared
by the `passage_seeds` best rows by reciprocal rank), as HippoRAG 2 seeds passages.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from pipeline.domain.entity_reads import EntityRef, RowMention
from pipeline.domain.read_model import Filters, Hit
from pipeline.entities.names import fold, normalise
from pipeline.ports import EntityGraph, EntityHops
from pipeline.retrieval.ppr import forward_push, power_iteration, seed_vector, transition_arrays
from pipeline.retrieval.ppr_snapshots import PprSnapshots
from pipeline.retrieval.seeds import (
    common_word_match,
    longest_matches,
    named_in_query,
    query_names,
    query_ngrams,
)

# Edge weights of the walk: a mention and a stated relation count alike; a pair the resolver
# held as possibly the same entity passes half as much as one a person verified.
MENTION_WEIGHT = 1.0
LINK_WEIGHTS = {("RELATES", None): 1.0, ("POSSIBLY_SAME", "verified"): 1.0,
                ("POSSIBLY_SAME", "held"): 0.5}
EXPLAIN_MAX_HUBS = 20  # hubs named in an explain block (the count is always given)


@dataclass(frozen=True)
class PprConfig:
    """The PPR stage's bounds and constants (settings `BRAINSTREAM_PPR_*`)."""

    max_ngram: int = 8
    hub_fraction: float = 0.10
    hub_min_rows: int = 20
    max_hops: int = 3
    max_nodes: int = 2000
    max_edges: int = 8000
    frontier: int = 64
    rows_per_entity: int = 100
    damping: float = 0.5
    max_iterations: int = 50
    tolerance: float = 1e-6
    stable_k: int = 20
    stable_rounds: int = 3
    push_epsilon: float = 1e-4
    passage_seeds: int = 30
    passage_seed_weight: float = 0.0


@dataclass(frozen=True)
class Seed:
    """A seed entity: the query words it was matched on, how, its weight, and whether the
    query writes those words as a name (`seeds.named_in_query`: strong)."""

    entity: EntityRef
    text: str
    method: str
    weight: float
    strong: bool = False


@dataclass(frozen=True)
class SeedPlan:
    """The query's seeds and the hubs it named (dropped)."""

    seeds: tuple[Seed, ...]
    hubs: tuple[EntityRef, ...]
    hub_limit: float

    def strong_only(self) -> SeedPlan:
        """The plan with its strong seeds alone (what mode `auto` walks from)."""
        return SeedPlan(tuple(s for s in self.seeds if s.strong), self.hubs, self.hub_limit)


@dataclass
class PprResult:
    """Objects ranked by PPR (best row's score), the sum of their rows' scores (`mass`), the
    part rows behind them, and what ran."""

    objects: list[Hit]
    parts: list[Hit]
    nodes: int = 0
    edges: int = 0
    entities: int = 0
    rows: int = 0
    hops: int = 0
    iterations: int = 0
    stopped: str = ""
    truncated: bool = False
    hubs: list[EntityRef] = field(default_factory=list)
    mass: dict[uuid.UUID, float] = field(default_factory=dict)
    source: str = "sql"  # where the walk read its hops: "sql" or "snapshot"
    snapshot_age: float | None = None  # seconds since the snapshot's last refresh read


@dataclass(frozen=True)
class RowRef:
    """A row of the subgraph (or of the first stage's answer, as a weak seed): its object,
    and whether it is a part."""

    row_id: uuid.UUID
    object_id: uuid.UUID
    is_part: bool


class _Subgraph:
    """The growing subgraph: node numbers for entities and rows, weighted undirected edges,
    each row's object, and the caps."""

    def __init__(self, max_nodes: int, max_edges: int) -> None:
        self.max_nodes = max_nodes
        self.max_edges = max_edges
        self.index: dict[tuple[str, uuid.UUID], int] = {}
        self.keys: list[tuple[str, uuid.UUID]] = []
        self.edges: dict[tuple[int, int], float] = {}
        self.rows: dict[int, RowRef] = {}
        self.truncated = False
        # the edges again as columns, in insertion order, for `matrix`
        self._ends: tuple[list[int], list[int], list[float]] = ([], [], [])

    def node(self, kind: str, key: uuid.UUID) -> tuple[int | None, bool]:
        """The node's number and whether it is new; None when the node cap refuses it."""
        found = self.index.get((kind, key))
        if found is not None:
            return found, False
        if len(self.keys) >= self.max_nodes:
            self.truncated = True
            return None, False
        self.index[(kind, key)] = len(self.keys)
        self.keys.append((kind, key))
        return len(self.keys) - 1, True

    def edge(self, a: int, b: int, weight: float) -> None:
        pair = (min(a, b), max(a, b))
        if pair in self.edges or a == b:
            return
        if len(self.edges) >= self.max_edges:
            self.truncated = True
            return
        self.edges[pair] = weight
        self._ends[0].append(pair[0])
        self._ends[1].append(pair[1])
        self._ends[2].append(weight)

    def matrix(self) -> sp.csr_matrix:
        """The transition matrix of the subgraph as it stands."""
        u, v, w = self._ends
        return transition_arrays(len(self.keys), np.asarray(u, dtype=np.int64),
                                 np.asarray(v, dtype=np.int64), np.asarray(w, dtype=np.float64))


class PprStage:
    """Seeds, a bounded subgraph and PPR over one namespace's entity layer (`EntityGraph`)."""

    name = "ppr"

    def __init__(self, graph: EntityGraph, config: PprConfig | None = None,
                 snapshots: PprSnapshots | None = None) -> None:
        self.graph = graph
        self.config = config or PprConfig()
        self.snapshots = snapshots  # None: every walk reads its hops in SQL

    async def plan(self, namespace: uuid.UUID, query: str) -> SeedPlan:
        """The query's seed entities (longest match wins) with weights, and the hubs named."""
        grams = query_ngrams(query, max_tokens=self.config.max_ngram)
        keys = {g: normalise(g.text) for g in grams}
        folds = {g: fold(g.text) for g in grams}
        matches = await self.graph.match_names(
            namespace, sorted({k for k in keys.values() if k}),
            sorted({f for f in folds.values() if f}))
        named: dict[str, dict[uuid.UUID, tuple[EntityRef, str]]] = {}
        folded: dict[str, dict[uuid.UUID, tuple[EntityRef, str]]] = {}
        for m in matches:
            target = folded if m.method == "fold" else named
            target.setdefault(m.key, {}).setdefault(m.entity.id, (m.entity, m.method))
        found = {g: {eid: hit for eid, hit in (named.get(keys[g]) or folded.get(folds[g])
                                               or {}).items()
                     if not common_word_match(g.text, folds[g], hit[0].name)}
                 for g in grams}
        chosen = longest_matches([g for g, entities in found.items() if entities])
        names = query_names(query)
        live = await self.graph.live_rows(namespace)
        hub_limit = max(self.config.hub_fraction * live, float(self.config.hub_min_rows))
        seeds: dict[uuid.UUID, Seed] = {}
        hubs: dict[uuid.UUID, EntityRef] = {}
        for gram in chosen:
            for entity, method in found[gram].values():
                if entity.part_count > hub_limit:
                    hubs[entity.id] = entity
                elif entity.part_count > 0 and entity.id not in seeds:
                    seeds[entity.id] = Seed(entity, gram.text, method, 1.0 / entity.part_count,
                                            named_in_query(gram, names))
        return SeedPlan(tuple(seeds.values()), tuple(hubs.values()), hub_limit)

    async def rank(self, namespace: uuid.UUID, plan: SeedPlan, filters: Filters,
                   scope_ids: Sequence[uuid.UUID], first_rows: Sequence[RowRef] = ()
                   ) -> PprResult:
        """PPR from the plan's seeds (and `first_rows`, the first stage's best rows, as weak
        seeds when configured), rows promoted to objects the filters and scope allow."""
        cfg = self.config
        graph = _Subgraph(cfg.max_nodes, cfg.max_edges)
        seeds: dict[int, float] = {}
        total = sum(s.weight for s in plan.seeds)
        for seed in plan.seeds:
            number, _ = graph.node("e", seed.entity.id)
            if number is not None:
                seeds[number] = seed.weight / total
        weak = list(first_rows[: cfg.passage_seeds]) if cfg.passage_seed_weight > 0 else []
        harmonic = sum(1.0 / r for r in range(1, len(weak) + 1))
        for rank, row in enumerate(weak, start=1):
            number, _ = graph.node("r", row.row_id)
            if number is not None:
                graph.rows[number] = row
                seeds[number] = seeds.get(number, 0.0) + (
                    cfg.passage_seed_weight / rank / harmonic)
        if not seeds:
            return PprResult([], [], hubs=list(plan.hubs))
        hubs = {h.id: h for h in plan.hubs}
        # one source for the whole walk: a snapshot refreshed between two hops would mix states
        view, age = None, None
        if self.snapshots is not None:
            view = self.snapshots.view(namespace)
            age = None if view is None else max(0.0, self.snapshots.clock() - view.as_of)
        reader: EntityHops = view if view is not None else self.graph
        hops = await self._walk(reader, namespace, graph, seeds, plan.hub_limit, hubs)
        n = len(graph.keys)
        matrix = graph.matrix()
        vector = seed_vector(n, seeds)
        candidates = sorted(graph.rows)
        run = power_iteration(matrix, vector, damping=cfg.damping, candidates=candidates,
                              top_k=cfg.stable_k, stable_rounds=cfg.stable_rounds,
                              max_iterations=cfg.max_iterations, tolerance=cfg.tolerance)
        best: dict[uuid.UUID, float] = {}
        # The walk's probability of standing on any of an object's rows: one node per passage,
        # as in HippoRAG, so a passage split in parts is not ranked by a fragment (the re-rank
        # orders by it; RRF keeps the best row, which measured better there).
        mass: dict[uuid.UUID, float] = {}
        parts: list[Hit] = []
        for number, row in graph.rows.items():
            score = float(run.scores[number])
            if score <= 0:
                continue
            best[row.object_id] = max(best.get(row.object_id, 0.0), score)
            mass[row.object_id] = mass.get(row.object_id, 0.0) + score
            if row.is_part:
                parts.append(Hit(row.row_id, score))
        # The walk reads only live rows of live objects of the namespace, and a live object
        # always has a searchable row (its live parts, or itself when it has none): without
        # filters or scope every object found is one a search may return.
        visible = (set(best) if filters.empty and not scope_ids else
                   await self.graph.visible_objects(namespace, list(best), filters, scope_ids))
        objects = sorted((Hit(o, s) for o, s in best.items() if o in visible),
                         key=lambda h: (-h.score, str(h.id)))
        parts.sort(key=lambda h: (-h.score, str(h.id)))
        return PprResult(objects, parts, nodes=n, edges=len(graph.edges),
                         entities=n - len(graph.rows), rows=len(graph.rows), hops=hops,
                         iterations=run.iterations, stopped=run.stopped,
                         truncated=graph.truncated, hubs=list(hubs.values()),
                         mass={o.id: mass[o.id] for o in objects},
                         source="sql" if view is None else "snapshot", snapshot_age=age)

    async def _walk(self, reader: EntityHops, namespace: uuid.UUID, graph: _Subgraph,
                    seeds: dict[int, float], hub_limit: float, hubs: dict[uuid.UUID, EntityRef]
                    ) -> int:
        """Grow `graph` from the seeds hop by hop; the hops taken. Hubs met are recorded in
        `hubs` and left out."""
        cfg = self.config
        frontier = set(seeds)
        hops = 0
        for hop in range(cfg.max_hops):
            chosen = set(frontier) if hop == 0 else self._choose(graph, seeds, frontier)
            if not chosen:
                break
            hops += 1
            frontier -= chosen
            entity_ids = sorted(graph.keys[i][1] for i in chosen if graph.keys[i][0] == "e")
            row_ids = sorted(graph.keys[i][1] for i in chosen if graph.keys[i][0] == "r")
            room = max(0, cfg.max_edges - len(graph.edges))
            # Rows past the node bound would be read only to be refused: the hop's entities
            # share the nodes left (at least one row each, for the edges to rows already in).
            nodes_left = max(0, cfg.max_nodes - len(graph.keys))
            per_entity = min(cfg.rows_per_entity,
                             max(1, -(-nodes_left // max(1, len(entity_ids)))))
            found = await reader.hop(namespace, entity_ids, row_ids, per_entity, room + 1)
            counts: dict[uuid.UUID, int] = {}
            for m in found.rows_of:
                counts[m.entity_id] = counts.get(m.entity_id, 0) + 1
            if any(c >= per_entity for c in counts.values()) or len(found.links) > room:
                graph.truncated = True
            for m in [*found.rows_of, *found.entities_of]:
                if m.entity_part_count > hub_limit:
                    hubs.setdefault(m.entity_id, EntityRef(m.entity_id, "", m.entity_part_count))
                    continue
                self._mention(graph, m, frontier)
            for link in found.links:
                self._link(graph, link.from_id, link.from_part_count, link.to_id,
                           link.to_part_count, LINK_WEIGHTS.get((link.edge_type, link.status),
                                                                0.0), hub_limit, hubs, frontier)
        return hops

    @staticmethod
    def _mention(graph: _Subgraph, m: RowMention, frontier: set[int]) -> None:
        entity, new_entity = graph.node("e", m.entity_id)
        row, new_row = graph.node("r", m.row_id)
        if row is not None:
            graph.rows.setdefault(row, RowRef(m.row_id, m.object_id, m.is_part))
        for number, new in ((entity, new_entity), (row, new_row)):
            if number is not None and new:
                frontier.add(number)
        if entity is not None and row is not None:
            graph.edge(entity, row, MENTION_WEIGHT)

    @staticmethod
    def _link(graph: _Subgraph, a: uuid.UUID, a_count: int, b: uuid.UUID, b_count: int,
              weight: float, hub_limit: float, hubs: dict[uuid.UUID, EntityRef],
              frontier: set[int]) -> None:
        if weight <= 0:
            return
        ends = []
        for key, count in ((a, a_count), (b, b_count)):
            if count > hub_limit:
                hubs.setdefault(key, EntityRef(key, "", count))
                return
            number, new = graph.node("e", key)
            if number is None:
                return
            if new:
                frontier.add(number)
            ends.append(number)
        graph.edge(ends[0], ends[1], weight)

    def _choose(self, graph: _Subgraph, seeds: dict[int, float], frontier: set[int]
                ) -> set[int]:
        """The `frontier` unexpanded nodes with the highest forward-push estimate."""
        if len(frontier) <= self.config.frontier:
            return set(frontier)
        n = len(graph.keys)
        push = forward_push(graph.matrix(), seed_vector(n, seeds),
                            damping=self.config.damping, epsilon=self.config.push_epsilon)
        estimate = push.p + push.r
        ranked = sorted(frontier, key=lambda i: (-float(estimate[i]), i))
        return set(ranked[: self.config.frontier])

