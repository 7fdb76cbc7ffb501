"""The memory benchmark's report: one Markdown table of recall per mode (ratios against the
lexical baseline measured in the same run), the latency and lag figures, integrity, and PASS or
FAIL per target of issue 12."""

from __future__ import annotations

from collections import Counter

import memorydata as data
from timing import percentile

TARGETS = {"recall": 0.75, "get_p95_ms": 20.0, "lag_p99_s": 10.0}


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def report(embedder: str, questions: list[data.Question], recall: dict[str, dict[str, float]],
           get_ms: dict[str, float], lags: list[float], checks: dict[str, dict[str, int]],
           ingest_s: float, machine: list[str]) -> str:
    cats = Counter(q.category for q in questions)
    base = recall["lexical"]["1-4@10"]
    lines = [f"# Memory benchmark (LoCoMo dev, {len(questions)} questions; embedder {embedder})",
             "", *machine, "",
             "Questions per category: " + ", ".join(f"{c}: {cats[c]}" for c in sorted(cats)),
             "", "| mode | " + " | ".join(f"c{c} R@5 / R@10" for c in (1, 2, 3, 4))
             + " | 1-4 R@5 | 1-4 R@10 | R@10 vs lexical | cat 5 R@10 |",
             "|---|" + "---|" * 8]
    for mode, r in recall.items():
        cells = [f"{r.get(f'c{c}@5', 0):.3f} / {r.get(f'c{c}@10', 0):.3f}" for c in (1, 2, 3, 4)]
        lines.append(f"| {mode} | " + " | ".join(cells)
                     + f" | {r['1-4@5']:.3f} | {r['1-4@10']:.3f} | "
                     f"{r['1-4@10'] / base if base else 0:.2f}x | {r.get('5@10', 0):.3f} |")
    finite = [x for x in lags if x != float("inf")]
    lag_p99 = percentile(lags, 99) if lags and len(finite) == len(lags) else float("inf")
    hybrid = recall["hybrid"]["1-4@10"]
    intact = all(c["stored"] == c["published"] and c["extracted once (x3)"] == 3 * c["published"]
                 and c["extracted twice"] == 0 and c["failed"] == 0 for c in checks.values())
    lines += ["", "| figure | value | target | verdict |", "|---|---|---|---|",
              f"| hybrid R@10, categories 1-4 | {hybrid:.3f} | >= {TARGETS['recall']} and > "
              f"lexical ({base:.3f}) | {_verdict(hybrid >= TARGETS['recall'] and hybrid > base)} |",
              f"| GET memory p95 (10,000-message session, window) | {get_ms['window p95']:.1f} ms"
              f" | < {TARGETS['get_p95_ms']:.0f} ms "
              f"| {_verdict(get_ms['window p95'] < TARGETS['get_p95_ms'])} |",
              f"| GET memory p95 (lastn=50) | {get_ms['lastn=50 p95']:.1f} ms | (info) | |",
              f"| summary lag p99 at 20 msg/s (extractive; p50 {percentile(finite, 50):.2f} s,"
              f" max {max(finite, default=0):.2f} s) | {lag_p99:.2f} s | < "
              f"{TARGETS['lag_p99_s']:.0f} s | {_verdict(lag_p99 < TARGETS['lag_p99_s'])} |",
              f"| every message indexed, none twice | {'yes' if intact else 'NO'} | yes | "
              f"{_verdict(intact)} |",
              f"| LoCoMo ingest (publish to extracted and summarised) | {ingest_s:.0f} s | | |",
              "", "| integrity | " + " | ".join(next(iter(checks.values()))) + " |",
              "|---|" + "---|" * len(next(iter(checks.values())))]
    for name, c in checks.items():
        lines.append(f"| {name} | " + " | ".join(str(v) for v in c.values()) + " |")
    lines += ["", "Turn level: a hit is a retrieved turn whose dia_id is in the question's "
              "evidence; a summary hit stands for the turns whose sentences it kept. Questions "
              "are asked across the user's sessions (POST /v1/memory/search's path)."]
    return "\n".join(lines)


