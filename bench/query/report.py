"""The read-path benchmark's results per scale and its Markdown report: one table per scale with
each operation's latency against the sum of the floors, where `search` spends its time, and the
targets.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

from bench.harness.inprocess import md_table
from bench.harness.runenv import machine_lines
from bench.harness.timing import Timing
from bench.query.lexical import lexical_verdict
from bench.query.ppr import ppr_verdict

# issue 40: search p95 (c=1) at most 15 ms at 100k parts and 40 ms at 1M, with at most 12 ms of
# CPU per call (the serving processes', c=1) at 100k; find_exact and 2-hop expand p95 at most
# 10 ms at 100k; throughput at concurrency 8 at least 1.8x concurrency 1 (two cores)
TARGET_SEARCH_MS = {100_000: 15.0, 1_000_000: 40.0}
TARGET_CPU_MS = 12.0
TARGET_FIND_EXACT_MS = 10.0
TARGET_THROUGHPUT_RATIO = 1.8
TARGET_EXPAND_MS = 10.0


def _search_target(parts: int) -> float:
    """The search p95 target of the nearest stated scale (100k below 550k parts, else 1M)."""
    return TARGET_SEARCH_MS[100_000 if parts < 550_000 else 1_000_000]


@dataclass
class ScaleResult:
    """Everything measured at one scale."""

    parts: int
    docs: int
    links: int
    load: dict[str, float]
    timings: list[Timing] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    disk: list[tuple[str, int]] = field(default_factory=list)     # (what, bytes)
    memory: list[tuple[str, int]] = field(default_factory=list)   # (what, resident bytes)


def report(results: list[ScaleResult], args: argparse.Namespace, total_s: float,
           ef: int, k: int, *, lexical_engine: str) -> str:
    """The Markdown report: one table per scale, then the targets."""
    lines = ["### Read-path latency (bench/query)", "", *machine_lines(),
             f"- command: `python -m bench.query {' '.join(sys.argv[1:])}`".rstrip(),
             "- data: SciFact sentences shuffled into new documents (seeded), chunked by the "
             "pipeline's chunker, static embedder (wordllama, 256 dims); queries: SciFact "
             "claims (search, find_objects, floors), document titles (find_exact), random "
             "documents (expand, max_hops=2, limit 20)",
             f"- floors: bare `ORDER BY embedding <=> v LIMIT {k}` (hnsw.ef_search={ef}, as the "
             f"engine sets it for candidate_k={k}) and bare `lexical @@ q ORDER BY "
             f"ts_rank(lexical, q) DESC LIMIT {k}` (q = OR of the claim's lexemes)",
             "- in-process: the engine as `pipeline.wiring.build_services` wires it (pool of 8, "
             f"`LEXICAL_ENGINE={lexical_engine}`), asyncio "
             "workers on one queue; latency per call, throughput = calls / wall time",
             f"- total wall time: {total_s / 60:.1f} min", ""]
    verdicts: list[str] = []
    for res in results:
        lines += [f"#### {res.parts:,} parts ({res.docs:,} documents, {res.links:,} links)", ""]
        if res.load:
            lines.append("Load: " + ", ".join(f"{name} {secs:.0f} s"
                                               for name, secs in res.load.items()))
            lines.append("")
        lines += [*(f"{note}." for note in res.notes), ""] if res.notes else []
        if res.disk or res.memory:
            lines += [md_table(["disk", "MiB"], [[what, f"{size / 2**20:,.0f}"]
                                                 for what, size in res.disk]), "",
                      md_table(["memory after the measurements", "MiB"],
                               [[what, f"{size / 2**20:,.0f}"] for what, size in res.memory]),
                      ""]
        floor_p95: dict[int, float] = {}
        for t in res.timings:
            if t.name.startswith("floor"):
                floor_p95[t.concurrency] = floor_p95.get(t.concurrency, 0.0) + t.ms(95)
        rows = []
        for t in res.timings:
            if t.name.startswith("search step"):
                continue
            ratio = ""
            if "search" in t.name and t.concurrency in floor_p95:
                ratio = f"{t.ms(95) / floor_p95[t.concurrency]:.1f}x"
            rows.append([t.name, t.concurrency, t.count, f"{t.ms(50):.1f}", f"{t.ms(95):.1f}",
                         f"{t.ms(99):.1f}", f"{t.throughput:.1f}", ratio, t.errors])
        lines += [md_table(["operation", "conc.", "calls", "p50 ms", "p95 ms", "p99 ms",
                            "calls/s", "p95 / sum of floor p95s", "errors"], rows), ""]
        steps = [t for t in res.timings if t.name.startswith("search step")]
        if steps:
            lines += ["Where search's time goes (each step alone, concurrency 1; inside "
                      "`search` the three channels run concurrently):", "",
                      md_table(["step", "calls", "p50 ms", "p95 ms", "mean ms"],
                               [[t.name.removeprefix("search step: "), t.count,
                                 f"{t.ms(50):.1f}", f"{t.ms(95):.1f}",
                                 f"{1000 * sum(t.latencies) / max(t.count, 1):.1f}"]
                                for t in steps]), ""]
        search = next((t for t in res.timings if t.name == "search" and t.concurrency == 1),
                      None)
        what_if = next((t for t in res.timings if t.name.startswith("what-if")
                        and t.concurrency == 1), None)
        expand = next((t for t in res.timings if t.name == "expand (2 hops)"
                       and t.concurrency == 1), None)
        if search is not None:
            target = _search_target(res.parts)
            ok = search.ms(95) <= target
            verdicts.append(
                f"- {res.parts:,} parts, search p95 (c=1) {search.ms(95):.1f} ms vs "
                f"{target:.0f} ms (the floors' sum: {floor_p95.get(1, 0.0):.1f} ms): "
                f"**{'PASS' if ok else 'FAIL'}**"
                + ("" if res.parts >= 90_000 else " (the targets are stated for 100k and 1M)"))
            if search.cpu and res.parts < 550_000:
                per_call = 1000 * search.cpu / max(search.count, 1)
                verdicts.append(
                    f"- {res.parts:,} parts, CPU per search call (c=1, the serving processes) "
                    f"{per_call:.1f} ms vs {TARGET_CPU_MS:.0f} ms: "
                    f"**{'PASS' if per_call <= TARGET_CPU_MS else 'FAIL'}**")
        exact = next((t for t in res.timings if t.name == "find_exact" and t.concurrency == 1),
                     None)
        if exact is not None and res.parts < 550_000:
            ok = exact.ms(95) <= TARGET_FIND_EXACT_MS
            verdicts.append(f"- {res.parts:,} parts, find_exact p95 (c=1) {exact.ms(95):.1f} ms "
                            f"vs {TARGET_FIND_EXACT_MS:.0f} ms: **{'PASS' if ok else 'FAIL'}**"
                            + ("" if res.parts >= 90_000 else " (stated for 100k)"))
        verdicts += throughput_verdicts(res.parts, res.timings)
        if what_if is not None:
            verdicts.append(
                f"  - what-if without the trigram channel: p95 {what_if.ms(95):.1f} ms "
                "(not the product as shipped)")
        if expand is not None and res.parts < 550_000:
            ok = expand.ms(95) <= TARGET_EXPAND_MS
            verdicts.append(f"- {res.parts:,} parts, 2-hop expand p95 (c=1) "
                            f"{expand.ms(95):.1f} ms vs {TARGET_EXPAND_MS:.0f} ms: "
                            f"**{'PASS' if ok else 'FAIL'}**")
        lexical = lexical_verdict(res.parts, res.timings)
        if lexical is not None:
            verdicts.append(lexical)
        ppr = ppr_verdict(res.parts, res.timings)
        if ppr is not None:
            verdicts.append(ppr)
    lines += ["#### Targets", "", *verdicts, ""]
    return "\n".join(lines)


def throughput_verdicts(parts: int, timings: list[Timing]) -> list[str]:
    """search's calls/s at the highest concurrency against concurrency 1 (in-process and over
    HTTP), with how many cores the serving processes kept busy where that was measured: on 2
    cores a CPU-bound call cannot gain more than the cores left idle at concurrency 1."""
    out = []
    for name in ("search", "HTTP search"):
        runs = sorted((t for t in timings if t.name == name), key=lambda t: t.concurrency)
        if len(runs) < 2 or runs[0].concurrency != 1 or not runs[0].throughput:
            continue
        one, top = runs[0], runs[-1]
        ratio = top.throughput / one.throughput
        busy = ""
        if one.cpu and top.cpu:
            busy = (f"; serving processes busy {one.cpu / one.wall:.2f} cores at c=1, "
                    f"{top.cpu / top.wall:.2f} at c={top.concurrency}; CPU per call "
                    f"{1000 * one.cpu / one.count:.1f} ms at c=1, "
                    f"{1000 * top.cpu / top.count:.1f} ms at c={top.concurrency}")
        verdicts = "PASS" if ratio >= TARGET_THROUGHPUT_RATIO else "FAIL"
        out.append(f"- {parts:,} parts, {name} throughput c={top.concurrency} / c=1: "
                   f"{top.throughput:.1f} / {one.throughput:.1f} calls/s = {ratio:.2f}x vs "
                   f"{TARGET_THROUGHPUT_RATIO:.1f}x: **{verdicts}**{busy}")
    return out
