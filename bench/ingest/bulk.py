"""The write path's apply of a burst of puts: runs of puts through set-based statements in batches
of BULK_BATCH_SIZE (pipeline/ingest/bulk.py), against the event-by-event path in batches of 200
(the former consumer), on the same SciFact documents, in one run.

Both paths apply the same documents in-process (`apply_batch`, one transaction per batch, as the
consumer and the replay do) on one fresh stack (`.brainstream-bench/bulk`, ports = defaults + 30
+ BRAINSTREAM_TEST_PORT_OFFSET), each pass into a namespace of its own (the documents' ids are
moved into it), alternating the paths for `--rounds` rounds so that the machine's load falls on
both alike. Per pass: wall seconds, this process's CPU (parsing, chunking, the driver) and
Postgres CPU (server and backends, `bench.ingest.leanwrites.postgres_cpu`), per document.

Targets: the bulk path's CPU per document (this process + Postgres) at most 0.7x the event-by-
event path's; its wall time per document within the 3.3 ms a 300 documents/s replay allows
(the replay's whole budget: the apply must leave most of it to the other stages).

Usage: python -m bench.ingest.bulk [--docs N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from dataclasses import replace
from typing import Any

from bench.harness.inprocess import apply_events, bench_settings, bench_stack
from bench.harness.runenv import load_average, machine, quiet_logging, say
from bench.ingest.leanwrites import postgres_cpu
from bench.quality.data import load_scifact, put_events
from pipeline.ingest.records import ingest_options
from pipeline.ingest.settings import BULK_BATCH_SIZE, CONSUMER_BATCH_SIZE

CPU_TARGET = 0.7  # the bulk path's CPU per document, at most this times the event-by-event's
REPLAY_BUDGET_MS = 1000 / 300  # a 300 documents/s replay's wall time per document


def moved(events: list[dict[str, Any]], namespace: uuid.UUID) -> list[dict[str, Any]]:
    """The events with their namespace and object ids moved to `namespace` (an id is global)."""
    return [{**e, "namespace": str(namespace),
             "data": {**e["data"], "id": str(uuid.uuid5(namespace, e["data"]["id"]))}}
            for e in events]


def apply_pass(settings: Any, postmaster: int, events: list[dict[str, Any]], *,
               bulk: bool) -> dict[str, float]:
    """Apply the events as one path does: ms per document of wall, own and Postgres CPU."""
    # the event-by-event path: the same code with no run long enough to go together
    options = ingest_options(settings)
    if not bulk:
        options = replace(options, min_run=sys.maxsize)
    pg, own, started = postgres_cpu(postmaster), time.process_time(), time.perf_counter()
    apply_events(settings, events, options=options,
                 batch_size=BULK_BATCH_SIZE if bulk else CONSUMER_BATCH_SIZE)
    wall = time.perf_counter() - started
    own = time.process_time() - own
    time.sleep(0.5)  # the backend of the pass has exited and been reaped
    pg = postgres_cpu(postmaster) - pg
    n = len(events)
    return {"wall": 1000 * wall / n, "own": 1000 * own / n, "pg": 1000 * pg / n,
            "cpu": 1000 * (own + pg) / n}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest.bulk", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    quiet_logging()
    offset = 30 + int(os.environ.get("BRAINSTREAM_TEST_PORT_OFFSET", "0"))
    settings = bench_settings("bulk", offset, "static")
    events = put_events(load_scifact(None))[:args.docs]
    load_before = load_average()
    passes: dict[str, list[dict[str, float]]] = {"event by event": [], "bulk": []}
    with bench_stack(settings, fresh=True) as stack:
        postmaster = next(pid for service in stack.services if service.name == "postgres"
                          and (pid := service.running_pid()) is not None)
        for round_ in range(args.rounds):
            order = (False, True) if round_ % 2 == 0 else (True, False)
            for together in order:
                name = "bulk" if together else "event by event"
                got = apply_pass(settings, postmaster, moved(events, uuid.uuid4()),
                                 bulk=together)
                passes[name].append(got)
                say(f"round {round_ + 1} {name}: " + ", ".join(f"{k} {v:.2f} ms/doc"
                                                               for k, v in got.items()))
    median = {name: {key: statistics.median(p[key] for p in runs) for key in runs[0]}
              for name, runs in passes.items()}
    base, bulk = median["event by event"], median["bulk"]
    ratio = bulk["cpu"] / base["cpu"]
    info = machine()
    lines = [f"## bench/ingest/bulk.py, {info['date']}", "",
             f"Command: python -m bench.ingest.bulk {' '.join(sys.argv[1:])}; {len(events)} "
             f"SciFact documents per pass, {args.rounds} rounds (medians); {info['cpus']} CPUs; "
             f"1-min load average {load_before} -> {load_average()}.", "",
             "| path | batch | wall ms/doc | docs/s | bench CPU ms/doc | Postgres CPU ms/doc "
             "| CPU ms/doc | CPU ratio |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, size in (("event by event", CONSUMER_BATCH_SIZE), ("bulk", BULK_BATCH_SIZE)):
        m = median[name]
        lines.append(f"| {name} | {size} | {m['wall']:.2f} | {1000 / m['wall']:.0f} | "
                     f"{m['own']:.2f} | {m['pg']:.2f} | {m['cpu']:.2f} | "
                     f"{m['cpu'] / base['cpu']:.2f}x |")
    lines += ["",
              f"- {'PASS' if ratio <= CPU_TARGET else 'FAIL'}: bulk CPU per document "
              f"{ratio:.2f}x the event-by-event path's (target <= {CPU_TARGET}x)",
              f"- {'PASS' if bulk['wall'] <= REPLAY_BUDGET_MS else 'FAIL'}: bulk apply "
              f"{bulk['wall']:.2f} ms/doc wall, {bulk['wall'] / REPLAY_BUDGET_MS:.0%} of a "
              f"300 documents/s replay's {REPLAY_BUDGET_MS:.2f} ms/doc"]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
