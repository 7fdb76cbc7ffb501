"""The PPR stage at scale, for `bench/query.py`: the loaded parts' entities extracted by the real
stage (`heuristic`), then the stage alone (seeds, subgraph, iteration) and `search` in mode
auto, on the same claims as the other operations.

Target: PPR stage p95 < 50 ms at 100k parts (issue 11).
"""

from __future__ import annotations

import numpy as np
from querydata import NAMESPACE
from querymeasure import Inputs
from timing import Timing, run_concurrent

from pipeline.domain.read_model import Filters, SearchQuery
from pipeline.domain.settings import Settings
from pipeline.wiring import build_services

PPR_STEP = "search step: PPR stage (seeds, subgraph, iteration)"
TARGET_PPR_MS = 50.0


async def measure_ppr(settings: Settings, inputs: Inputs, n: int, budget: float
                      ) -> tuple[list[Timing], str]:
    """The PPR stage alone and search(mode=auto) at concurrency 1 on the first `n` claims;
    with a line on the subgraphs (size, iterations, how many claims named a seed)."""
    services = await build_services(settings)
    stage = services.engine.ppr
    assert stage is not None
    claims = inputs.claims[:n]
    nodes: list[int] = []
    edges: list[int] = []
    iterations: list[int] = []
    seeded = truncated = 0
    try:
        for claim in claims[-10:]:  # warm-up: the namespace's row count, the pool
            await stage.plan(NAMESPACE, claim)

        async def ppr(claim: str) -> object:
            nonlocal seeded, truncated
            plan = await stage.plan(NAMESPACE, claim)
            result = await stage.rank(NAMESPACE, plan, Filters(), ())
            if plan.seeds:
                seeded += 1
                nodes.append(result.nodes)
                edges.append(result.edges)
                iterations.append(result.iterations)
                truncated += result.truncated
            return result

        async def auto(claim: str) -> object:
            return await services.engine.search(NAMESPACE, SearchQuery(claim, limit=10,
                                                                       mode="auto"))

        stage_timing = await run_concurrent(PPR_STEP, ppr, claims, 1, budget)
        auto_timing = await run_concurrent("search (mode auto)", auto, claims, 1, budget)
    finally:
        await services.close()
    if nodes:
        note = (f"PPR subgraph over the {seeded} of {stage_timing.count} claims that named a "
                f"seed: nodes p50 {np.median(nodes):.0f} / p95 {np.percentile(nodes, 95):.0f}"
                f" / max {max(nodes)}, edges p50 {np.median(edges):.0f} / max {max(edges)}, "
                f"iterations p50 {np.median(iterations):.0f}, truncated {truncated}")
    else:
        note = f"PPR: none of the {stage_timing.count} claims named a seed entity"
    return [stage_timing, auto_timing], note


def ppr_verdict(parts: int, timings: list[Timing]) -> str | None:
    """The PASS/FAIL line of the PPR stage's p95 at this scale."""
    step = next((t for t in timings if t.name == PPR_STEP), None)
    if step is None:
        return None
    ok = step.ms(95) < TARGET_PPR_MS
    return (f"- {parts:,} parts, PPR stage p95 (c=1) {step.ms(95):.1f} ms vs "
            f"{TARGET_PPR_MS:.0f} ms: **{'PASS' if ok else 'FAIL'}**"
            + ("" if parts >= 100_000 else " (the target is stated for 100k)"))
