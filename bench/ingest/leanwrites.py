"""The write path's own cost per document, without the broker, the extraction stage or the graph:
SciFact documents applied in-process as the consumer applies them (`apply_batch`, one
transaction per consumer batch), then embedded as the embedding workers embed them
(`EmbeddingService`, static embedder), on a fresh stack (`.brainstream-bench/leanwrites`, ports =
defaults + 30 + BRAINSTREAM_TEST_PORT_OFFSET).

Per phase (apply, embed): Postgres CPU seconds (the server and every backend, those that exited
meanwhile included: the postmaster's reaped-children times, psutil), WAL
bytes (`pg_current_wal_lsn()` deltas) and the rows each table inserted / updated / HOT-updated
(`pg_stat_user_tables`). The same script runs on any version of the schema, so the figures of
two versions compare directly; CPU figures are indicative on a loaded machine, WAL and row counts
are deterministic.

Usage: python -m bench.ingest.leanwrites [--docs N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import psutil

from bench.harness.inprocess import apply_events, bench_settings, bench_stack
from bench.harness.runenv import load_average, machine, quiet_logging, say
from bench.ingest.writeamp import difference, snapshot, table_lines
from bench.quality.data import load_scifact, put_events
from pipeline.embedding.embedders import build_embedder
from pipeline.embedding.service import EmbeddingService
from pipeline.postgres.pool import make_pool


def postgres_cpu(postmaster: int) -> float:
    """CPU seconds the server has used so far: the postmaster, its live processes, and the ones
    that exited (reaped: counted in the postmaster's children times). A difference of two
    readings is exact whichever backends came and went in between."""
    root = psutil.Process(postmaster)
    times = root.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in root.children(recursive=True):
        try:
            t = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
    return total


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest.leanwrites",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=600)
    args = parser.parse_args()
    quiet_logging()
    offset = 30 + int(os.environ.get("BRAINSTREAM_TEST_PORT_OFFSET", "0"))
    settings = bench_settings("leanwrites", offset, "static")
    events = put_events(load_scifact(None))[:args.docs]
    embedder = build_embedder(settings)
    embedder.embed(["warm up"])
    lines: list[str] = []
    with bench_stack(settings, fresh=True) as stack:
        postmaster = next(pid for service in stack.services if service.name == "postgres"
                          and (pid := service.running_pid()) is not None)
        pool = make_pool(settings, max_size=2, name="bench-leanwrites")
        load = load_average()
        try:
            phases = []
            for phase in ("apply", "embed"):
                before = snapshot(settings, wait=True)
                pg_before, own_before, started = (postgres_cpu(postmaster), time.process_time(),
                                                  time.perf_counter())
                if phase == "apply":
                    apply_events(settings, events)
                else:
                    EmbeddingService(settings, pool, embedder).run(max_batches=10**6)
                wall = time.perf_counter() - started
                own = time.process_time() - own_before
                pool.close()  # its backends exit and flush their table counters
                pool = make_pool(settings, max_size=2, name="bench-leanwrites")
                cost = difference(settings, before, snapshot(settings, wait=True))
                # read after the flush wait: the phase's backends have exited and been reaped
                cpu = {"postgres": postgres_cpu(postmaster) - pg_before, "bench": own}
                phases.append((phase, wall, cpu, cost))
                say(f"{phase}: {wall:.1f} s, postgres {cpu.get('postgres', 0):.2f} CPU s, "
                    f"WAL {cost.wal_bytes / 1e6:.1f} MB")
        finally:
            pool.close()
    docs = len(events)
    info = machine()
    lines += [f"## bench/ingest/leanwrites.py, {info['date']}", "",
              f"Command: python -m bench.ingest.leanwrites {' '.join(sys.argv[1:])}; {docs} "
              f"SciFact documents, static embedder; 1-min load average {load} -> "
              f"{load_average()}.", "",
              "| phase | wall s | Postgres CPU ms/doc | bench process CPU ms/doc | WAL KiB/doc |",
              "|---|---:|---:|---:|---:|"]
    for phase, wall, cpu, cost in phases:
        lines.append(f"| {phase} | {wall:.1f} | {1000 * cpu.get('postgres', 0) / docs:.1f} | "
                     f"{1000 * cpu.get('bench', 0) / docs:.1f} | "
                     f"{cost.per_doc(docs) / 1024:.1f} |")
    for phase, _, _, cost in phases:
        lines += ["", f"### {phase}", "", *table_lines(cost, docs)]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
