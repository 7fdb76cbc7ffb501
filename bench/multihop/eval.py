"""The multi-hop benchmark's evaluation through the engine: every query in lexical, hybrid, ppr
and auto mode, and the sweep of the stage fusion's RRF k and of the weak passage seeds (how
many, their weight).

The candidate channels' answers are cached per query (`CachedChannel`): every mode and every
engine variant fuses the very same first-stage hits, so the sweep measures the fusion and the
PPR stage alone, and runs in seconds. The PPR stage itself (seeds, subgraph, iteration) runs
for real every time.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from bench.quality.data import Dataset
from pipeline.domain.read_model import Filters, Hit, SearchQuery
from pipeline.ports import Channel
from pipeline.retrieval.engine import RetrievalEngine
from pipeline.retrieval.ppr.stage import PprStage

PAGE = 10  # the first page: recall@5 and nDCG@10 read no further


class CachedChannel:
    """A channel that answers each (namespace, query, filters, scope, k) once."""

    def __init__(self, inner: Channel) -> None:
        self.inner = inner
        self.name = inner.name
        self.degrade = inner.degrade
        self.cache: dict[tuple[uuid.UUID, str, Filters, tuple[uuid.UUID, ...], int],
                         list[Hit]] = {}

    async def candidates(self, namespace: uuid.UUID, query: str, filters: Filters,
                         scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        key = (namespace, query, filters, tuple(scope_ids), k)
        if key not in self.cache:
            self.cache[key] = await self.inner.candidates(namespace, query, filters, scope_ids,
                                                          k)
        return self.cache[key]


@dataclass(frozen=True)
class Variant:
    """One engine configuration of the sweep: the stage fusion (RRF's k, or PPR re-ranking the
    hybrid list's best `rerank_depth` objects when > 0), and the hybrid list's best rows as
    weak seeds (how many, their total weight)."""

    rrf_k: int
    passage_weight: float
    passage_seeds: int = 5
    rerank_depth: int = 0

    @property
    def label(self) -> str:
        seeds = (f", passage seeds {self.passage_seeds} x {self.passage_weight:g}"
                 if self.passage_weight and self.passage_seeds else "")
        fusion = (f"re-rank top {self.rerank_depth}" if self.rerank_depth
                  else f"rrf_k {self.rrf_k}")
        return f"{fusion}{seeds}"


@dataclass
class ModeRun:
    """Ranked document keys per query, the modes that ran (auto), and the PPR stage's costs."""

    ranked: dict[str, list[str]] = field(default_factory=dict)
    ran_ppr: int = 0
    nodes: list[int] = field(default_factory=list)
    iterations: list[int] = field(default_factory=list)
    truncated: int = 0
    degraded: int = 0  # answers a channel failed (dense timing out on a loaded machine)
    walks: dict[str, int] = field(default_factory=dict)  # where the walk read: snapshot / sql
    seconds: float = 0.0


def engines(wired: RetrievalEngine, variant: Variant,
            channels: Sequence[CachedChannel]) -> RetrievalEngine:
    """The wired engine over the cached channels, with the variant's fusion and weak seeds."""
    assert wired.ppr is not None, "the wired engine has no PPR stage"
    stage = PprStage(wired.ppr.graph, replace(wired.ppr.config,
                                              passage_seed_weight=variant.passage_weight,
                                              passage_seeds=variant.passage_seeds),
                     wired.ppr.snapshots)
    config = replace(wired.config, ppr_rrf_k=variant.rrf_k,
                     ppr_rerank_depth=variant.rerank_depth)
    return RetrievalEngine(wired.searcher, wired.reader, wired.result_sets, wired.catalog,
                           wired.embed_query, config, channels=list(channels), ppr=stage)


async def run_mode(engine: RetrievalEngine, ds: Dataset, key_of: dict[uuid.UUID, str],
                   mode: str, concurrency: int) -> ModeRun:
    """Every query of `ds` through `engine.search` in `mode` (explain on, to count costs)."""
    out = ModeRun()
    gate = asyncio.Semaphore(concurrency)

    async def one(qid: str, text: str) -> None:
        async with gate:
            page = await engine.search(ds.namespace, SearchQuery(
                text, limit=PAGE, mode=mode, explain=mode != "hybrid"))  # type: ignore[arg-type]
        out.ranked[qid] = [key_of[o.id] for o in page.objects if o.id in key_of]
        out.degraded += page.degrade is not None
        if page.mode == "ppr":
            out.ran_ppr += 1
            explain = page.explain or {}
            graph = explain.get("subgraph")
            if isinstance(graph, dict):
                out.nodes.append(int(graph["nodes"]))
            out.iterations.append(int(str(explain.get("iterations", 0))))
            out.truncated += bool(explain.get("truncated"))
            source = str(explain.get("walk_source"))
            out.walks[source] = out.walks.get(source, 0) + 1

    started = time.perf_counter()
    await asyncio.gather(*(one(qid, text) for qid, text in ds.queries.items()))
    out.seconds = time.perf_counter() - started
    return out


def costs(run: ModeRun) -> str:
    """The PPR stage's subgraph and iterations over the queries that ran it."""
    if not run.nodes:
        return "-"
    walks = ", ".join(f"{k} {v}" for k, v in sorted(run.walks.items()))
    return (f"nodes p50 {np.median(run.nodes):.0f} / max {max(run.nodes)}, iterations p50 "
            f"{np.median(run.iterations):.0f}, truncated {run.truncated}; walked on: {walks}")


async def snapshot_ready(engine: RetrievalEngine, namespace: uuid.UUID,
                         timeout: float = 300.0) -> None:
    """Wait for the namespace's PPR snapshot (PPR_WALK=snapshot), so the evaluation walks it;
    past the timeout the SQL walk answers (counted per run)."""
    snaps = engine.ppr.snapshots if engine.ppr is not None else None
    deadline = time.perf_counter() + timeout
    while snaps is not None and snaps.view(namespace) is None:
        if time.perf_counter() > deadline:
            return
        await asyncio.sleep(0.1)


async def stage_latency(engine: RetrievalEngine, ds: Dataset) -> str:
    """The PPR stage alone (seeds, subgraph, iteration) on every query of `ds`, one at a time:
    p50/p95 over all queries and over those that named a seed, and the subgraphs' size."""
    stage = engine.ppr
    assert stage is not None
    every: list[float] = []
    seeded: list[float] = []
    nodes: list[int] = []
    for text in ds.queries.values():
        started = time.perf_counter()
        plan = await stage.plan(ds.namespace, text)
        result = await stage.rank(ds.namespace, plan, Filters(), ())
        every.append(time.perf_counter() - started)
        if plan.seeds:
            seeded.append(every[-1])
            nodes.append(result.nodes)

    def ms(values: list[float], q: float) -> str:
        return f"{1000 * float(np.percentile(values, q)):.1f}" if values else "-"

    return (f"{len(every)} queries: p50 {ms(every, 50)} ms, p95 {ms(every, 95)} ms; the "
            f"{len(seeded)} with a seed: p50 {ms(seeded, 50)} ms, p95 {ms(seeded, 95)} ms, "
            f"subgraph nodes p50 {np.median(nodes) if nodes else 0:.0f}, max "
            f"{max(nodes, default=0)}")
