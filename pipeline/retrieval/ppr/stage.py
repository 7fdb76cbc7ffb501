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
   `max_nodes` are shared by the hop's entities. When the namespace's in-memory snapshot is
   fresh (`PprSnapshots`), the seeds are matched against its names and the subgraph grown on
   its arrays (`ppr_arraywalk.py`, no SQL); else the names are looked up and each hop read in
   SQL (`ppr_sqlwalk.py`); both answer the same (`PprResult.source` says which).
3. PPR (`rank`): power iteration with damping `damping`, dangling mass back to the seeds,
   stopped once the top `stable_k` rows stay put; a row scores its PPR, or with
   `degree_normalised` the mass its edges bring it per unit of its degree
   (`ppr.inflow_per_degree`); rows promoted to their objects by array
   operations (an object scores its best row; `PprResult.mass` also gives the sum of its
   rows), kept only when the request's filters and scope allow them.

Optionally the first stage's best rows join as weak seeds (`passage_seed_weight` > 0, shared
by the `passage_seeds` best rows by reciprocal rank), as HippoRAG 2 seeds passages.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import numpy.typing as npt

from pipeline.domain.entity_reads import EntityRef, Hop, NameMatch
from pipeline.domain.read_model import Filters, Hit
from pipeline.entities.names import fold, normalise
from pipeline.ports import EntityGraph, EntityHops
from pipeline.retrieval.ppr.arraywalk import array_walk
from pipeline.retrieval.ppr.model import PprConfig, RowRef, Walked
from pipeline.retrieval.ppr.pagerank import (
    Vector,
    inflow_per_degree,
    power_iteration,
    seed_vector,
    transition_arrays,
    weighted_degrees,
)
from pipeline.retrieval.ppr.seeds import (
    Ngram,
    common_word_match,
    longest_matches,
    named_in_query,
    query_names,
    query_ngrams,
)
from pipeline.retrieval.ppr.snapshots import PprSnapshots
from pipeline.retrieval.ppr.sqlwalk import sql_walk

__all__ = ["EXPLAIN_MAX_HUBS", "PprConfig", "PprResult", "PprStage", "RowRef", "Seed",
           "SeedPlan"]

EXPLAIN_MAX_HUBS = 20  # hubs named in an explain block (the count is always given)
# The order matches are taken in, whichever source answered: exact name before alias before
# fold, then entity id (the seeds' order numbers their nodes, and node numbers break ties).
_METHOD_ORDER = {"exact": 0, "alias": 1, "fold": 2}


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

    def joined(self, other: SeedPlan) -> SeedPlan:
        """This plan's seeds, then those of `other` it lacks; the hubs of both."""
        mine = {s.entity.id for s in self.seeds}
        hubs = {h.id: h for h in (*self.hubs, *other.hubs)}
        return SeedPlan((*self.seeds, *(s for s in other.seeds if s.entity.id not in mine)),
                        tuple(hubs.values()), self.hub_limit)


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
class _HopsAt:
    """The entity layer's hops with RELATES as it counts at (world time, system time)."""

    graph: EntityGraph
    at: tuple[datetime, datetime]

    async def hop(self, namespace: uuid.UUID, entity_ids: Sequence[uuid.UUID],
                  row_ids: Sequence[uuid.UUID], per_entity: int, link_limit: int) -> Hop:
        return await self.graph.hop_at(namespace, entity_ids, row_ids, per_entity, link_limit,
                                       self.at)


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
        found = await self._matched(namespace, query)
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

    async def plan_messages(self, namespace: uuid.UUID, message_ids: Sequence[uuid.UUID]
                            ) -> SeedPlan:
        """Seeds from conversation messages: the entities the live messages name (migration
        0055), weighed and screened for hubs as a query's are, all strong (a message names
        them as a passage does; method `message`). The walk from them is the documents' walk
        (snapshot or SQL alike): a conversation is where it starts, never a node of it, so
        answers without messages are unchanged."""
        named = await self.graph.message_entities(namespace, message_ids)
        live = await self.graph.live_rows(namespace)
        hub_limit = max(self.config.hub_fraction * live, float(self.config.hub_min_rows))
        seeds = [Seed(entity, text, "message", 1.0 / entity.part_count, True)
                 for text, entity in named if 0 < entity.part_count <= hub_limit]
        hubs = [entity for _, entity in named if entity.part_count > hub_limit]
        return SeedPlan(tuple(seeds), tuple(hubs), hub_limit)

    async def ground(self, namespace: uuid.UUID, text: str
                     ) -> list[tuple[Ngram, list[tuple[EntityRef, str]]]]:
        """Every span of `text` the seeds' matcher reads as an entity's name (longest first,
        never overlapping, in text order) with the entities it names and the layer of each
        (`exact`, `alias`, `fold`): the matcher `plan` seeds from, over a whole passage.
        Hubs and entities no live row names are kept: this says what the text names."""
        found = await self._matched(namespace, text)
        chosen = longest_matches([g for g, entities in found.items() if entities])
        return [(gram, list(found[gram].values())) for gram in chosen]

    async def _matched(self, namespace: uuid.UUID, query: str
                       ) -> dict[Ngram, dict[uuid.UUID, tuple[EntityRef, str]]]:
        """Each n-gram of `query` with the live entities it names and how (none: unmatched)."""
        grams = query_ngrams(query, max_tokens=self.config.max_ngram)
        keys = {g: normalise(g.text) for g in grams}
        folds = {g: fold(g.text) for g in grams}
        wanted = (sorted({k for k in keys.values() if k}), sorted({f for f in folds.values()
                                                                   if f}))
        view = None if self.snapshots is None else self.snapshots.peek(namespace)
        matches: list[NameMatch] = (view.match_names(*wanted) if view is not None else
                                    await self.graph.match_names(namespace, *wanted))
        matches.sort(key=lambda m: (_METHOD_ORDER.get(m.method, 3), m.entity.id))
        named: dict[str, dict[uuid.UUID, tuple[EntityRef, str]]] = {}
        folded: dict[str, dict[uuid.UUID, tuple[EntityRef, str]]] = {}
        for m in matches:
            target = folded if m.method == "fold" else named
            target.setdefault(m.key, {}).setdefault(m.entity.id, (m.entity, m.method))
        return {g: {eid: hit for eid, hit in (named.get(keys[g]) or folded.get(folds[g])
                                              or {}).items()
                    if not common_word_match(g.text, folds[g], hit[0].name)}
                for g in grams}

    async def rank(self, namespace: uuid.UUID, plan: SeedPlan, filters: Filters,
                   scope_ids: Sequence[uuid.UUID], first_rows: Sequence[RowRef] = (), *,
                   config: PprConfig | None = None,
                   at: tuple[datetime, datetime] | None = None) -> PprResult:
        """PPR from the plan's seeds (and `first_rows`, the first stage's best rows, as weak
        seeds when configured), rows promoted to objects the filters and scope allow;
        `config` replaces the stage's own for this walk (a request's `fusion.ppr`); `at`
        (world time, system time: a search's `as_of` / `known_at`) walks the RELATES facts
        counting then, in SQL (snapshots hold the present only)."""
        cfg = config or self.config
        total = sum(s.weight for s in plan.seeds)
        entities = [(s.entity.id, s.weight / total) for s in plan.seeds]
        weak = list(first_rows[: cfg.passage_seeds]) if cfg.passage_seed_weight > 0 else []
        harmonic = sum(1.0 / r for r in range(1, len(weak) + 1))
        rows = [(row, cfg.passage_seed_weight / rank / harmonic)
                for rank, row in enumerate(weak, start=1)]
        hubs = {h.id: h for h in plan.hubs}
        # one source for the whole walk: a snapshot refreshed between two hops would mix states
        view = (self.snapshots.view(namespace) if self.snapshots is not None
                and (entities or rows) and at is None else None)
        age: float | None = None
        if view is not None and self.snapshots is not None:
            age = max(0.0, self.snapshots.clock() - view.as_of)
            walked = array_walk(view, cfg, entities, rows, plan.hub_limit, hubs)
        else:
            hops: EntityHops = self.graph if at is None else _HopsAt(self.graph, at)
            walked = await sql_walk(hops, namespace, cfg, entities, rows, plan.hub_limit, hubs)
        if not walked.seeds:
            return PprResult([], [], hubs=list(plan.hubs))
        result = await self._ranked(namespace, walked, filters, scope_ids, cfg)
        result.source, result.snapshot_age = ("sql" if view is None else "snapshot"), age
        return result

    async def _ranked(self, namespace: uuid.UUID, walked: Walked, filters: Filters,
                      scope_ids: Sequence[uuid.UUID], cfg: PprConfig) -> PprResult:
        """Power iteration over the walked subgraph; rows promoted to objects by array
        operations."""
        matrix = transition_arrays(walked.n, walked.u, walked.v, walked.w)
        rank_key: Callable[[Vector], Vector] | None = None
        if cfg.degree_normalised:
            transposed = matrix.T.tocsr()
            degree = weighted_degrees(walked.n, walked.u, walked.v, walked.w)

            def rank_key(x: Vector) -> Vector:
                return inflow_per_degree(transposed, x, degree, damping=cfg.damping)
        run = power_iteration(matrix, seed_vector(walked.n, walked.seeds), damping=cfg.damping,
                              candidates=walked.row_nodes, top_k=cfg.stable_k,
                              stable_rounds=cfg.stable_rounds,
                              max_iterations=cfg.max_iterations, tolerance=cfg.tolerance,
                              rank_key=rank_key)
        ranked = run.scores if rank_key is None else rank_key(run.scores)
        scores = ranked[walked.row_nodes]
        positive = scores > 0
        kept = scores[positive]
        codes, first, which = np.unique(walked.object_codes[positive], return_index=True,
                                        return_inverse=True)
        best = np.zeros(len(codes), dtype=np.float64)
        np.maximum.at(best, which, kept)
        # The walk's probability of standing on any of an object's rows: one node per passage,
        # as in HippoRAG, so a passage split in parts is not ranked by a fragment (the re-rank
        # orders by it; RRF keeps the best row, which measured better there). Summed in node
        # order, as a loop over the rows would.
        mass = np.bincount(which, weights=kept, minlength=len(codes))
        order = _by_score_then_id(best, walked.object_halves[positive][first])
        # The walk reads only live rows of live objects of the namespace, and a live object
        # always has a searchable row (its live parts, or itself when it has none): without
        # filters or scope every object found is one a search may return.
        if not (filters.empty and not scope_ids):
            ids = [walked.object_key(c) for c in codes.tolist()]
            visible = await self.graph.visible_objects(namespace, ids, filters, scope_ids)
            order = order[np.asarray([ids[i] in visible for i in order.tolist()], dtype=bool)]
        objects = [Hit(walked.object_key(c), s) for c, s in
                   zip(codes[order].tolist(), best[order].tolist(), strict=True)]
        part = walked.is_part[positive]
        part_scores = kept[part]
        at = _by_score_then_id(part_scores, walked.row_halves[positive][part])
        parts = [Hit(walked.row_key(c), s) for c, s in
                 zip(walked.row_codes[positive][part][at].tolist(), part_scores[at].tolist(),
                     strict=True)]
        rows = len(walked.row_nodes)
        return PprResult(objects, parts, nodes=walked.n, edges=len(walked.u),
                         entities=walked.n - rows, rows=rows, hops=walked.hops,
                         iterations=run.iterations, stopped=run.stopped,
                         truncated=walked.truncated, hubs=list(walked.hubs.values()),
                         mass=dict(zip((o.id for o in objects), mass[order].tolist(),
                                       strict=True)))


def _by_score_then_id(scores: npt.NDArray[np.float64], halves: npt.NDArray[np.uint64]
                      ) -> npt.NDArray[np.int64]:
    """The order of best score first, ties by id (the ids as `id_halves`)."""
    order: npt.NDArray[np.int64] = np.lexsort((halves[:, 1], halves[:, 0], -scores))
    return order
