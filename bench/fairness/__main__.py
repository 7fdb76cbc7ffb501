"""Fairness between tenants: tenant B's search latency and errors through the real API, with
tenant A idle and with A sending the worst request mix its key allows, in one run.

1. A fresh embedded stack of its own (`.brainstream-bench/fairness`, ports = defaults + 1100 +
   BRAINSTREAM_TEST_PORT_OFFSET, or --port-offset), static embedder, the real pipeline processes
   as children (consumer, embedding, extraction and relay workers).
2. Ingest through the broker: per tenant `--docs` HotpotQA passages in its main namespace and
   `--sessions` LoCoMo sessions of one user; A also owns `--namespaces` small namespaces of
   `--small-docs` passages each (more than the 64 PPR snapshots an API process keeps, so its
   rotation keeps starting builds). Then the pipeline is let finish (entities extracted).
3. The API (`brainstream api`, API_WORKERS unset: one worker per core) with one key per
   tenant (A's bound to all its namespaces), its producer pointed (BRAINSTREAM_KAFKA_BOOTSTRAP)
   at a slow broker: a proxy of the benchmark's that holds every chunk sent to the broker
   `--broker-delay` seconds (`slowbroker.py`); the pipeline talks to the broker directly.
4. B warms up (its requests once), then each of `--repeats` repeats runs two phases of
   `--seconds` each with the same B load (`--b-loops` closed loops of `auto` and hybrid
   searches over its namespace, the same requests in the same order):
   - A idle;
   - A hostile: `--a-loops` closed loops in a child process, each cycling through a memory
     search across its 20 sessions (messages and summaries, both channels, neighbouring turns:
     several statements per request), an `auto` search of its next namespace (the first in
     each API process starts a snapshot build) and a publish of new documents with `wait`
     against the slow broker; a refused request is sent again at once.
   Between repeats the pipeline is let finish A's publishes, so each idle phase is idle.
5. Report: per phase B's requests, p50, p95 (medians over repeats) and error rate (non-2xx
   answers and transport errors; percentiles over every request, errors included), A's
   answers by status, the cores each component kept busy, and PASS/FAIL for B's error rate 0
   and B's p95 with A hostile within 2x of the idle figure.

The benchmark, A's client and B's client share the machine with the API: A's client is a
process of its own (never B's event loop), and its CPU is reported with the rest.

    python -m bench.fairness [--quick] [--repeats 3] [--seconds 30] [--a-loops 24] [--out F]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

from bench.fairness import data
from bench.fairness.load import HostilePlan, parse_mix, steady
from bench.fairness.report import Phase, report
from bench.fairness.stack import HostileChild, api_process, slow_broker, wait_idle
from bench.harness.inprocess import bench_settings
from bench.harness.processes import CpuMeter, PipelineProcesses, fresh_stack
from bench.harness.runenv import bench_parser, emit_report, log, machine_lines, quiet_logging
from pipeline.kafka.io import make_producer
from pipeline.kafka.publisher import EventPublisher
from pipeline.services.stack import Stack
from pipeline.settings import Settings

PORT_OFFSET = 1100 + int(os.environ.get("BRAINSTREAM_TEST_PORT_OFFSET", "0"))
QUICK = {"repeats": 1, "seconds": 10.0, "docs": 100, "sessions": 6, "namespaces": 70,
         "small_docs": 2}


def parse_args() -> argparse.Namespace:
    parser = bench_parser(__doc__, "python -m bench.fairness")
    parser.add_argument("--quick", action="store_true",
                        help="a short run: " + ", ".join(f"--{k.replace('_', '-')} {v}"
                                                         for k, v in QUICK.items()))
    parser.add_argument("--repeats", type=int, default=3, help="idle + hostile phase pairs")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each phase")
    parser.add_argument("--docs", type=int, default=300, help="documents per tenant")
    parser.add_argument("--sessions", type=int, default=20, help="sessions per tenant")
    parser.add_argument("--namespaces", type=int, default=80,
                        help="A's small namespaces besides its main one")
    parser.add_argument("--small-docs", type=int, default=4,
                        help="documents in each of A's small namespaces")
    parser.add_argument("--a-loops", type=int, default=24, help="A's concurrent loops")
    parser.add_argument("--b-loops", type=int, default=4, help="B's concurrent loops")
    parser.add_argument("--mix", default="memory:1,auto:1,publish:1", type=parse_mix,
                        help="what each of A's loops sends in turn, kind:weight")
    parser.add_argument("--publish-events", type=int, default=20,
                        help="documents in each of A's publishes")
    parser.add_argument("--broker-delay", type=float, default=2.0,
                        help="seconds the slow broker holds each chunk the API sends it")
    parser.add_argument("--workers", type=int, default=2,
                        help="the embedding worker's processes")
    parser.add_argument("--port-offset", type=int, default=PORT_OFFSET,
                        help="added to every default port of the benchmark's stack and API")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    if args.quick:
        defaults = parser.parse_args([])
        for name, value in QUICK.items():
            if getattr(args, name) == getattr(defaults, name):
                setattr(args, name, value)
    return args


def ingest(settings: Settings, a: data.Tenant, b: data.Tenant, corpus: data.Corpus,
           chosen: data.Sessions) -> float:
    """Publish both tenants' documents and sessions through the broker; seconds until the
    pipeline applied, embedded and extracted them all."""
    publisher = EventPublisher(make_producer(settings), settings.topic_events)
    try:
        events = data.put_events(corpus)
        for tenant in (a, b):
            events += data.session_events(tenant, chosen)
        for event in events:
            publisher.send_event(event)
        publisher.flush()
    finally:
        publisher.producer.close()
    log(f"published {corpus.documents} documents in {len(corpus.by_namespace)} namespaces and "
        f"{2 * chosen.messages} messages in {2 * len(chosen.turns)} sessions")
    return wait_idle(settings, 3600, "ingest", list(corpus.by_namespace),
                     (corpus.documents, 2 * chosen.messages))


def measure(args: argparse.Namespace, settings: Settings, stack: Stack,
            procs: PipelineProcesses, a: data.Tenant, b: data.Tenant, corpus: data.Corpus,
            chosen: data.Sessions) -> tuple[list[Phase], int]:
    """The phases (see the module docstring); also the connections the slow broker saw."""
    base_url = f"http://127.0.0.1:{settings.api_port}"
    requests = data.steady_queries(corpus.by_namespace[b.main])
    plan = HostilePlan(base_url, a, args.a_loops, chosen.questions,
                       {str(ns): [d.title for d in corpus.by_namespace[ns]]
                        for ns in a.namespaces},
                       corpus.by_namespace[a.main], args.publish_events, args.mix)
    phases: list[Phase] = []
    with slow_broker(settings, args.broker_delay) as (bootstrap, seen), \
            api_process(settings, {"BRAINSTREAM_KAFKA_BOOTSTRAP": bootstrap,
                                   "BRAINSTREAM_API_KEYS": data.api_keys_setting((a, b))}) as api:
        log(f"API up on {base_url}; B warms up ({len(requests)} requests)")
        asyncio.run(steady(base_url, b.key, requests, args.b_loops, 600.0,
                           limit=len(requests)))
        for repeat in range(1, args.repeats + 1):
            for name in ("idle", "hostile"):
                procs.check_alive()
                meter = CpuMeter(stack, procs)
                meter.roots["api"] = [api.pid]
                child = HostileChild(plan) if name == "hostile" else None
                if child is not None:
                    meter.roots["tenant A"] = [child.pid]
                meter.start()
                if child is not None:
                    child.go(args.seconds, repeat)
                samples = asyncio.run(steady(base_url, b.key, requests, args.b_loops,
                                             args.seconds))
                tally = child.tally() if child is not None else None
                wall, cpu = meter.stop()
                if child is not None:
                    child.close()
                phase = Phase(name, repeat, samples, wall, cpu, tally)
                phases.append(phase)
                log(f"repeat {repeat}, A {name}: B {len(samples)} requests, p50 "
                    f"{phase.ms(50):.0f} ms, p95 {phase.ms(95):.0f} ms, {phase.errors} errors"
                    + (f"; A {sum(tally.answers.values())} requests" if tally else ""))
            settled = wait_idle(settings, 600, f"repeat {repeat}")
            log(f"the pipeline was idle again {settled:.0f} s after the hostile phase")
    return phases, seen.connections


def main() -> int:
    args = parse_args()
    quiet_logging()
    settings = bench_settings("fairness", args.port_offset, "static",
                              api_port=8000 + args.port_offset)
    a, b = data.tenants(args.namespaces)
    corpus = data.corpus(a, b, args.docs, args.small_docs)
    chosen = data.sessions(args.sessions)
    machine = machine_lines()
    log(f"fresh stack in {settings.resolved_data_dir}")
    stack = fresh_stack(settings)
    procs = PipelineProcesses(settings, workers=args.workers)
    procs.start()
    started = time.monotonic()
    try:
        ingest_s = ingest(settings, a, b, corpus, chosen)
        log(f"ingested in {ingest_s:.0f} s")
        phases, connections = measure(args, settings, stack, procs, a, b, corpus, chosen)
        procs.check_alive()
    finally:
        procs.stop()
        stack.stop()
    setup = [
        f"Per tenant: {args.docs} HotpotQA documents, {len(chosen.turns)} LoCoMo sessions "
        f"({chosen.messages} messages); A also {args.namespaces} namespaces of "
        f"{args.small_docs} documents. Static embedder; API workers: {settings.api_workers} "
        f"(API_WORKERS unset: the cores); ingested in {ingest_s:.0f} s.",
        f"B: {args.b_loops} closed loops of `auto` and hybrid searches. A hostile: "
        f"{args.a_loops} closed loops of {' / '.join(args.mix)} (memory: a memory search "
        f"across its sessions; auto: an `auto` search over its {len(a.namespaces)} "
        f"namespaces; publish: {args.publish_events} documents with `wait`). The API's "
        f"producer talks through a slow broker ({args.broker_delay:g} s per chunk; "
        f"{connections} connections). {args.repeats} repeat(s) of {args.seconds:g} s per "
        f"phase; run took {time.monotonic() - started:.0f} s.",
    ]
    notes = ["Percentiles are over every B request (errors included); the table's p50 and p95 "
             "are the medians of the repeats'. Degraded: answered 200 with `degrade` set (a "
             "channel left out, e.g. the embedder timed out), not counted as errors. Cores "
             "busy: CPU-seconds per wall second."]
    emit_report(report(phases, setup, machine, notes), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
