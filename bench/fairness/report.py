"""The fairness benchmark's report: tenant B's latency and errors with tenant A idle and
hostile (medians over the repeats), A's answers, where the CPU went, and PASS or FAIL for the
targets of issue 35 (B's error rate 0; B's p95 with A hostile within 2x of its p95 with A
idle)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.fairness.load import HOSTILE_KINDS, HostileTally, Sample
from bench.harness.timing import percentile

P95_RATIO_MAX = 2.0
# CPU components (harness CpuMeter names) as the report groups them
_SERVICES = ("postgres", "broker", "s3store", "falkordb", "redis")
_PIPELINE = ("consumer", "worker", "extract", "relay")


@dataclass
class Phase:
    """One phase of one repeat: B's samples, A's tally (hostile only), its wall time and the
    CPU seconds each component spent."""

    name: str
    repeat: int
    samples: list[Sample]
    wall: float
    cpu: dict[str, float] = field(default_factory=dict)
    tally: HostileTally | None = None

    def ms(self, q: float) -> float:
        return percentile([s.seconds for s in self.samples], q) * 1000.0

    @property
    def errors(self) -> int:
        return sum(not s.ok for s in self.samples)

    @property
    def degraded(self) -> int:
        return sum(s.degraded for s in self.samples)


def _a_codes(tally: HostileTally | None) -> Counter[str]:
    """A's answers by status class: 2xx, 429, 503, other (transport errors included)."""
    out: Counter[str] = Counter()
    for (_, status), count in (tally.answers.items() if tally else ()):
        if status.isdigit() and status.startswith("2"):
            out["2xx"] += count
        elif status in ("429", "503"):
            out[status] += count
        else:
            out["other"] += count
    return out


def _cores(phases: Sequence[Phase]) -> dict[str, float]:
    """Cores busy per component group, over the phases' summed wall time."""
    wall = sum(p.wall for p in phases) or 1.0
    groups = {"API": ("api",), "A's client": ("tenant A",), "B's client": ("bench",),
              "pipeline": _PIPELINE, "services": _SERVICES}
    return {name: sum(p.cpu.get(c, 0.0) for p in phases for c in members) / wall
            for name, members in groups.items()}


def _summary(phases: Sequence[Phase]) -> tuple[int, float, float, int, int]:
    """(B requests, median p50, median p95, B errors, B degraded) over the repeats of one
    phase."""
    return (sum(len(p.samples) for p in phases),
            statistics.median(p.ms(50) for p in phases),
            statistics.median(p.ms(95) for p in phases), sum(p.errors for p in phases),
            sum(p.degraded for p in phases))


def report(phases: Sequence[Phase], setup: list[str], machine: list[str],
           notes: list[str]) -> str:
    """The Markdown report."""
    idle = [p for p in phases if p.name == "idle"]
    hostile = [p for p in phases if p.name == "hostile"]
    lines = ["# Fairness benchmark: tenant B's searches, tenant A idle and hostile", "",
             *machine, "", *setup, ""]
    lines += ["| phase | B requests | B p50 ms | B p95 ms | B error rate | B degraded | "
              "A requests | A 2xx | A 429 | A 503 | A other |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, group in (("A idle", idle), ("A hostile", hostile)):
        count, p50, p95, errors, degraded = _summary(group)
        codes: Counter[str] = sum((_a_codes(p.tally) for p in group), Counter())
        a_total = sum(codes.values())
        lines.append(f"| {name} | {count} | {p50:.0f} | {p95:.0f} | "
                     f"{errors / max(count, 1):.2%} | {degraded} | {a_total} | {codes['2xx']} | "
                     f"{codes['429']} | {codes['503']} | {codes['other']} |")
    ratio = _summary(hostile)[2] / max(_summary(idle)[2], 1e-9)
    p50_ratio = _summary(hostile)[1] / max(_summary(idle)[1], 1e-9)
    paired = ", ".join(f"{h.ms(95) / max(i.ms(95), 1e-9):.2f}x"
                       for i, h in zip(idle, hostile, strict=False))
    throughput = (sum(len(p.samples) for p in hostile)
                  / max(sum(len(p.samples) for p in idle), 1))
    lines += ["", f"B's p95 with A hostile / with A idle: **{ratio:.2f}x** "
                  f"(p50: {p50_ratio:.2f}x); medians over {len(idle)} repeat(s). Per repeat, "
                  f"p95: {paired}. B's requests with A hostile / with A idle: "
                  f"{throughput:.2f}x.", ""]
    lines += ["Each repeat:", "", "| repeat | phase | B requests | B p50 ms | B p95 ms | "
              "B errors | B degraded | cores busy: API / A's client / B's client / pipeline / "
              "services |", "|---:|---|---:|---:|---:|---:|---:|---|"]
    for p in phases:
        cores = " / ".join(f"{v:.2f}" for v in _cores([p]).values())
        lines.append(f"| {p.repeat} | A {p.name} | {len(p.samples)} | {p.ms(50):.0f} | "
                     f"{p.ms(95):.0f} | {p.errors} | {p.degraded} | {cores} |")
    lines += ["", *_hostile_lines(hostile), "", *notes, ""]
    b_errors = sum(p.errors for p in phases)
    b_requests = sum(len(p.samples) for p in phases)
    lines += ["| target | measured | result |", "|---|---|---|",
              f"| B error rate 0 (both phases) | {b_errors} of {b_requests} | "
              f"{'PASS' if b_errors == 0 else 'FAIL'} |",
              f"| B p95 with A hostile <= {P95_RATIO_MAX:g}x with A idle | {ratio:.2f}x | "
              f"{'PASS' if ratio <= P95_RATIO_MAX else 'FAIL'} |"]
    return "\n".join(lines)


def _hostile_lines(hostile: Sequence[Phase]) -> list[str]:
    """A's answers per request kind and status, and the modes its `auto` searches ran in."""
    answers: Counter[tuple[str, str]] = Counter()
    modes: Counter[str] = Counter()
    answered: dict[str, list[float]] = {}
    for p in hostile:
        if p.tally:
            answers.update(p.tally.answers)
            modes.update(p.tally.auto_modes)
            for kind, seconds in p.tally.answered.items():
                answered.setdefault(kind, []).extend(seconds)
    statuses = sorted({s for _, s in answers}, key=lambda s: (not s.isdigit(), s))
    lines = ["A's answers by request (all hostile phases), and the median time of a 2xx:", "",
             "| request | " + " | ".join(statuses) + " | 2xx p50 ms |",
             "|---|" + "---:|" * (len(statuses) + 1)]
    for kind in HOSTILE_KINDS:
        p50 = (f"{percentile(answered[kind], 50) * 1000:.0f}" if answered.get(kind) else "-")
        lines.append(f"| {kind} | " + " | ".join(str(answers[(kind, s)]) for s in statuses)
                     + f" | {p50} |")
    shown = ", ".join(f"{mode} {n}" for mode, n in modes.most_common()) or "none"
    lines += ["", f"A's `auto` searches answered 200 ran in mode: {shown}."]
    return lines
