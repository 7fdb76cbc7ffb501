"""What each stage of the pipeline costs per document, the graph relay among them, and what the
graph holds (SciFact, static embedder; a diagnostic: no target).

Step by step: its own embedded stack (data dir `.brainstream-bench/projection`, ports = defaults
+ 2050 + BRAINSTREAM_TEST_PORT_OFFSET); SciFact documents applied through the consumer's write
path (`apply_batch`) in chunks of `--chunk`, and after each chunk every background stage of
`pipeline/wiring/stages.py` run once in order, in this process, on the resources a replay
builds (`InProcessWork`: the configured extractor, static embedder, FalkorDB writer, change
events to the broker), each draining its work; at the end the stages run again until nothing
waits (settled). The CPU of each step is metered across this process and every server of the
stack (Postgres, FalkorDB, the broker and its store, Redis), so a stage's row holds the work it
caused anywhere. The report gives CPU ms per document of each step, split by process, and each
step's share of the whole; then what the graph holds at the end, by label and relation type.
A chunk is about one consumer batch, so the relay sees the batches a steady stream gives it (not
one coalesced drain at the end, which would flatter it). docs/architecture.md ("The graph holds
objects and links") uses it to weigh a projection's cost against the reads it serves.
"""

from __future__ import annotations

import functools
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness.inprocess import apply_events, bench_settings, bench_stack
from bench.harness.processes import CpuMeter, PipelineProcesses
from bench.harness.runenv import (
    bench_parser,
    emit_report,
    load_average,
    log,
    machine_lines,
    quiet_logging,
)
from bench.ingest.corpus import cycle_docs, load_corpus, put_envelope
from pipeline.graph.falkordb.schema import connect
from pipeline.kafka.io import KafkaChangeSink, make_producer
from pipeline.lexical.writer import LexicalWriter
from pipeline.ops.replay_step import InProcessWork
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from pipeline.wiring.stages import STAGES, pending

PORT_OFFSET = 2050 + int(os.environ.get("BRAINSTREAM_TEST_PORT_OFFSET", "0"))
NAMESPACE = uuid.UUID("5e1d7c0b-2f4a-4b8e-9c3d-7a6b5c4d3e2f")
APPLY = "apply (consumer's write path)"
# A read host's lexical replica (its follower's writer): no worker stage, one per read host.
LEXICAL = "lexical replica (per read host)"
# The metered processes, as the report's columns: this process (the stages' own code), then the
# servers; the broker's S3 store and Redis are summed into "other".
COLUMNS = ("bench", "postgres", "falkordb")
MAX_SETTLE_PASSES = 20


@dataclass
class StepCost:
    """CPU seconds one step spent, by process, summed over its runs."""

    cpu: dict[str, float] = field(default_factory=dict)
    wall: float = 0.0

    def add(self, wall: float, used: dict[str, float]) -> None:
        self.wall += wall
        for name, seconds in used.items():
            self.cpu[name] = self.cpu.get(name, 0.0) + seconds

    @property
    def total(self) -> float:
        return sum(self.cpu.values())

    def column(self, name: str) -> float:
        if name == "other":
            return sum(v for k, v in self.cpu.items() if k not in COLUMNS)
        return self.cpu.get(name, 0.0)


def metered(meter: CpuMeter, cost: StepCost, run: Callable[[], object]) -> None:
    """Run `run`, adding its wall and CPU time (every metered process) to `cost`."""
    meter.start()
    run()
    cost.add(*meter.stop())


def graph_contents(settings: Settings) -> list[tuple[str, int]]:
    """(what, count) of every node label and relation type in the graph, and its memory."""
    graph = connect(settings).select_graph(settings.graph_name)
    rows = [(f"nodes :{label}", int(n)) for label, n in graph.ro_query(
        "MATCH (n) RETURN labels(n)[0], count(n) ORDER BY labels(n)[0]").result_set]
    rows += [(f"edges :{rel}", int(n)) for rel, n in graph.ro_query(
        "MATCH ()-[e]->() RETURN type(e), count(e) ORDER BY type(e)").result_set]
    try:
        usage = connect(settings).connection.execute_command(
            "GRAPH.MEMORY", "USAGE", settings.graph_name)
        pairs = usage if isinstance(usage, dict) else dict(
            zip(usage[::2], usage[1::2], strict=False))
        pairs = {(k.decode() if isinstance(k, bytes) else str(k)): v for k, v in pairs.items()}
        total = pairs.get("total_graph_sz_mb")
        if total is not None:
            rows.append(("graph memory (MB)", int(total)))
    except Exception as exc:  # older servers: no GRAPH.MEMORY; the counts say enough
        log(f"GRAPH.MEMORY USAGE unavailable: {exc}")
    return rows


@dataclass
class Measured:
    """The cost of each step, the passes it took to settle, what the graph then held."""

    costs: dict[str, StepCost]
    passes: int
    contents: list[tuple[str, int]]


def measure(settings: Settings, docs: int, chunk: int) -> Measured:
    """Apply `docs` SciFact documents in chunks, running every stage after each, then until
    settled."""
    corpus = load_corpus()
    events = [put_envelope(NAMESPACE, key, doc) for key, doc in cycle_docs(corpus, docs)]
    costs: dict[str, StepCost] = {APPLY: StepCost(), **{s.name: StepCost() for s in STAGES},
                                  LEXICAL: StepCost()}
    with bench_stack(settings, fresh=True) as stack:
        meter = CpuMeter(stack, PipelineProcesses(settings, 0))
        pool = make_pool(settings, max_size=4)
        producer = make_producer(settings, enable_idempotence=False)
        try:
            work = InProcessWork.for_generation(
                settings, pool, KafkaChangeSink(producer, settings.topic_changes))
            work.embedder.embed(["warm the model up"])

            replica = LexicalWriter(settings, pool)  # what each read host's follower runs

            def run_stages() -> None:
                for stage in STAGES:
                    metered(meter, costs[stage.name],
                            functools.partial(stage.run, work, None, None, True))
                metered(meter, costs[LEXICAL], replica.run)

            for start in range(0, len(events), chunk):
                part = events[start:start + chunk]
                metered(meter, costs[APPLY], functools.partial(apply_events, settings, part))
                run_stages()
                log(f"{start + len(part)} of {docs} documents, load {load_average()}")
            passes = 0
            while (any(pending(pool).values()) or replica.pending()) \
                    and passes < MAX_SETTLE_PASSES:
                run_stages()
                passes += 1
            left = {k: v for k, v in pending(pool).items() if v}
            if left:
                raise RuntimeError(f"not settled after {passes} passes: {left}")
            contents = graph_contents(settings)
        finally:
            producer.close()
            pool.close()
    return Measured(costs, passes, contents)


def report(measured: Measured, docs: int, chunk: int) -> str:
    """The Markdown report: CPU per document of every step, its split and share; the graph."""
    steps, passes, contents = measured.costs, measured.passes, measured.contents
    whole = sum(c.total for c in steps.values())
    ms = 1000.0 / docs
    lines = ["# What each stage costs per document, the graph relay among them", "",
             *machine_lines(), "",
             f"{docs} SciFact documents, static embedder, applied in chunks of {chunk} with "
             f"every stage run after each, then {passes} passes until settled. CPU = this "
             "process (the stages' code) + every server of the stack, metered per step. "
             "A diagnostic: no target.", "",
             "| step | CPU ms/doc | this process | Postgres | FalkorDB | other servers "
             "| share of the pipeline |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, cost in steps.items():
        lines.append(
            f"| {name} | {cost.total * ms:.2f} | {cost.column('bench') * ms:.2f} | "
            f"{cost.column('postgres') * ms:.2f} | {cost.column('falkordb') * ms:.2f} | "
            f"{cost.column('other') * ms:.2f} | {cost.total / whole:.1%} |")
    lines.append(f"| **the pipeline** | **{whole * ms:.2f}** | | | | | 100% |")
    relay = [n for n in steps if n.startswith("relay")]
    graph_cpu = sum(c.column("falkordb") for c in steps.values())
    lines += ["", "Ratios (same run): " + "; ".join(
        f"{n} {steps[n].total / whole:.2f}x the pipeline's CPU" for n in relay)
        + f"; FalkorDB's own CPU {graph_cpu / whole:.2f}x.", "",
        "What the graph holds when settled:", "", "| what | count |", "|---|---:|",
        *(f"| {what} | {count:,} |" for what, count in contents)]
    return "\n".join(lines)


def main() -> None:
    """Measure, print the Markdown report to stdout (and `--out`)."""
    parser = bench_parser(__doc__, "python -m bench.ingest.projection")
    parser.add_argument("--docs", type=int, default=2000, help="SciFact documents")
    parser.add_argument("--chunk", type=int, default=200,
                        help="documents applied between two runs of the stages")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    quiet_logging()
    settings = bench_settings("projection", PORT_OFFSET, "static")
    started = time.perf_counter()
    measured = measure(settings, args.docs, args.chunk)
    log(f"measured in {time.perf_counter() - started:.0f} s")
    emit_report(report(measured, args.docs, args.chunk), args.out)


if __name__ == "__main__":
    main()
