"""Searches served by a read standby (POSTGRES_READ_DSN) against the same searches on the
primary, in the same run, on one machine.

Loads `--parts` parts (default 20k) the way `bench.query` does (`data.py`: synthetic SciFact
documents, static embedder, COPY) with LEXICAL_ENGINE=postgres, so every channel of a search
reads Postgres; starts a streaming standby of the benchmark's Postgres (`pg_basebackup -R`,
`bench/harness/standby.py`) and waits until it has replayed the load. Then the engine is wired
twice, as the API wires it: once on the primary alone (the baseline), once with the standby, and
each claim is searched (limit 10, hybrid) interleaved, one call at a time, as a request of the
namespace would be routed (`pipeline/postgres/routing.py`):

- `primary`: no standby configured (the baseline);
- `standby`: the standby configured, a request of a namespace with no read floor;
- `standby, floor replayed`: a read floor (a `wait: true` write's position) the standby has
  replayed: one Redis GET per request, the replayed position from the process's cache;
- `floor not replayed (paused)`: replay paused past the floor: reads go to the primary.

What each row costs each server is counted in `pg_stat_database.xact_commit` in a pass of its
own with the lag probes stopped (one statement per server every 0.5 s), per search, less what
the same time idle costs (the counting's own).

On one machine both servers share the same cores and disk, so the standby is not expected to
be faster: the point is offload (the primary runs none of the standby rows' statements). Targets:
the standby's p50 within 1.25x the primary's, the floor-checked p50 within 1.25x the primary's,
and the primary runs under 5 % of the standby row's transactions.

Usage: python -m bench.query.replica [--parts 20000] [--requests 200] [--reuse]
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from collections.abc import Awaitable, Callable

import psycopg

from bench.harness.inprocess import bench_settings, bench_stack, md_table
from bench.harness.runenv import (
    add_reuse_and_out,
    bench_parser,
    emit_report,
    log,
    machine_lines,
    quiet_logging,
)
from bench.harness.standby import Standby, primary_position
from bench.harness.timing import Timing, run_concurrent
from bench.query.data import (
    NAMESPACE,
    SEED,
    existing_parents,
    load_rows,
    load_source,
    make_docs,
    object_rows,
    part_count,
)
from pipeline.domain.read_model import SearchQuery
from pipeline.embedding.embedders.static import StaticEmbedder
from pipeline.postgres.routing import ReadRoute, routing
from pipeline.settings import Settings
from pipeline.wiring import Services, build_services, freeze_startup_heap

PORT_OFFSET = 1400 + int(os.environ.get("BRAINSTREAM_TEST_PORT_OFFSET", "0"))
STANDBY_PORT_STEP = 7  # the standby listens on the benchmark's Postgres port + this
LIMIT = 10
LATENCY_TARGET = 1.25  # the standby's p50 (and the floor-checked one) within this x primary's
OFFLOAD_TARGET = 0.05  # the primary's transactions during the standby rows / the standby's


def load(settings: Settings, parts: int) -> None:
    """Documents until the namespace holds `parts` parts (SQL postings and vocabulary too)."""
    if part_count(settings) >= parts:
        return
    rng = random.Random(SEED)
    docs = make_docs(load_source(), len(existing_parents(settings)),
                     parts - part_count(settings), rng)
    log(f"loading {len(docs)} documents ...")
    load_rows(settings, object_rows(docs, StaticEmbedder(), settings), [], [d.id for d in docs])


def wait_replayed(standby: Standby, position: int, timeout: float = 120.0) -> None:
    """Until the standby has replayed `position` (RuntimeError past `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while standby.replayed() < position:
        if time.monotonic() > deadline:
            raise RuntimeError("the standby did not replay the primary's position in time")
        time.sleep(0.05)


def commits(dsn: str) -> int:
    """Transactions committed in the database so far (its statistics)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT xact_commit FROM pg_stat_database"
                           " WHERE datname = current_database()").fetchone()
    assert row is not None
    return int(row[0])


async def measure(settings: Settings, standby: Standby, claims: list[str]
                  ) -> tuple[dict[str, Timing], dict[str, tuple[float, float]]]:
    """The rows' latencies, claim by claim, every row in turn, one call at a time; then per
    row, each server's transactions per search in a pass of its own, less what the same time
    idle costs each (the lag probes, the counting itself)."""
    on_primary = await build_services(settings)
    with_standby = await build_services(settings.model_copy(
        update={"postgres_read_dsn": standby.dsn, "postgres_read_max_lag": 30.0}))
    freeze_startup_heap()
    floors = with_standby.reads.floors

    def searcher(svc: Services) -> Callable[[str], Awaitable[object]]:
        async def search(q: str) -> object:
            with routing(ReadRoute(namespace=NAMESPACE, router=svc.reads)):
                return await svc.engine.search(NAMESPACE, SearchQuery(q, limit=LIMIT))
        return search

    plain, routed = searcher(on_primary), searcher(with_standby)
    other = uuid.uuid4()  # a namespace with no floor: the same rows, served by the standby

    def in_namespace(ns: uuid.UUID) -> Callable[[str], Awaitable[object]]:
        async def search(q: str) -> object:
            with routing(ReadRoute(namespace=ns, router=with_standby.reads)):
                return await with_standby.engine.search(NAMESPACE, SearchQuery(q, limit=LIMIT))
        return search

    rows = {"primary": plain, "standby": in_namespace(other),
            "standby, floor replayed": routed}
    latencies: dict[str, list[float]] = {name: [] for name in rows}
    work: dict[str, tuple[float, float]] = {}
    timed = claims[:-20]
    try:
        for call in rows.values():  # warm-up: caches, plans, both pools
            await run_concurrent("warm-up", call, claims[-20:], 1)
        floor = primary_position(settings)
        await floors.raise_to(NAMESPACE, floor)
        await asyncio.to_thread(wait_replayed, standby, floor)
        for claim in timed:
            for name, call in rows.items():
                latencies[name] += (await run_concurrent(name, call, [claim], 1)).latencies
        await with_standby.reads.stop()  # the lag probes' statements are not the searches'
        for name, call in rows.items():
            work[name] = await per_search(settings, standby, call, timed)
        await with_standby.reads.start()
        # replay paused past the namespace's floor: its searches go to the primary
        standby.one("SELECT pg_wal_replay_pause()")
        try:
            with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS bench_replica_marker (at timestamptz)")
                conn.execute("INSERT INTO bench_replica_marker VALUES (now())")
            await floors.raise_to(NAMESPACE, primary_position(settings))
            name = "floor not replayed (paused)"
            latencies[name] = []
            for claim in timed:
                latencies[name] += (await run_concurrent(name, routed, [claim], 1)).latencies
            await with_standby.reads.stop()
            work[name] = await per_search(settings, standby, routed, timed)
        finally:
            standby.one("SELECT pg_wal_replay_resume()")
    finally:
        await on_primary.close()
        await with_standby.close()
    return ({name: Timing(name, 1, tuple(values), sum(values))
             for name, values in latencies.items()}, work)


async def per_search(settings: Settings, standby: Standby,
                     call: Callable[[str], Awaitable[object]], claims: list[str]
                     ) -> tuple[float, float]:
    """Transactions per search on (primary, standby) while `call` runs over `claims` (the lag
    probes stopped), less those of an idle interval as long (the counting's own)."""
    before = commits(settings.effective_postgres_dsn), commits(standby.dsn)
    started = time.perf_counter()
    await run_concurrent("count", call, claims, 1)
    took = time.perf_counter() - started
    busy = commits(settings.effective_postgres_dsn) - before[0], commits(standby.dsn) - before[1]
    before = commits(settings.effective_postgres_dsn), commits(standby.dsn)
    await asyncio.sleep(took)
    idle = commits(settings.effective_postgres_dsn) - before[0], commits(standby.dsn) - before[1]
    return ((busy[0] - idle[0]) / len(claims), (busy[1] - idle[1]) / len(claims))


def report(timings: dict[str, Timing], work: dict[str, tuple[float, float]], parts: int
           ) -> str:
    """The Markdown report: latencies, ratios to the primary, each server's transactions."""
    base = timings["primary"].ms(50)
    rows = []
    for name, t in timings.items():
        on_primary, on_standby = work[name]
        rows.append([name, t.count, f"{t.ms(50):.2f}", f"{t.ms(95):.2f}",
                     f"{t.ms(50) / base:.2f}x", f"{on_primary:.2f}", f"{on_standby:.2f}"])
    standby_ratio = timings["standby"].ms(50) / base
    floor_ratio = timings["standby, floor replayed"].ms(50) / base
    offload = max(0.0, work["standby"][0]) / max(1e-9, work["standby"][1])
    verdicts = [
        f"- standby p50 / primary p50 = {standby_ratio:.2f} (target <= {LATENCY_TARGET}): "
        f"{'PASS' if standby_ratio <= LATENCY_TARGET else 'FAIL'}",
        f"- floor-checked p50 / primary p50 = {floor_ratio:.2f} (target <= {LATENCY_TARGET}):"
        f" {'PASS' if floor_ratio <= LATENCY_TARGET else 'FAIL'}",
        f"- primary transactions during the standby row / the standby's = {offload:.3f} "
        f"(target < {OFFLOAD_TARGET}): {'PASS' if offload < OFFLOAD_TARGET else 'FAIL'}",
    ]
    return "\n".join([
        "# Searches on a read standby against the primary", "", *machine_lines(), "",
        f"{parts} parts, LEXICAL_ENGINE=postgres (every channel reads Postgres), hybrid, limit "
        f"{LIMIT}, one call at a time, claims interleaved; both servers on this machine.", "",
        md_table(["row", "searches", "p50 ms", "p95 ms", "p50 / primary",
                  "primary xacts / search", "standby xacts / search"], rows),
        "", *verdicts])


def main() -> None:
    """Load, start the standby, measure, print the Markdown report to stdout."""
    parser = bench_parser(__doc__, "python -m bench.query.replica")
    parser.add_argument("--parts", type=int, default=20_000)
    parser.add_argument("--requests", type=int, default=200)
    add_reuse_and_out(parser, "keep the loaded stack from an earlier run")
    args = parser.parse_args()
    quiet_logging()
    settings = bench_settings("replica", PORT_OFFSET, "static", lexical_engine="postgres")
    with bench_stack(settings, fresh=not args.reuse, sql_postings=True):
        load(settings, args.parts)
        standby = Standby(settings, settings.resolved_data_dir / "standby",
                          settings.pg_port + STANDBY_PORT_STEP)
        log("starting the standby ...")
        standby.stop()
        standby.create()
        try:
            wait_replayed(standby, primary_position(settings))
            claims = load_source().claims[: args.requests + 20]
            timings, work = asyncio.run(measure(settings, standby, claims))
            parts = part_count(settings)
        finally:
            standby.stop()
    emit_report(report(timings, work, parts), args.out)


if __name__ == "__main__":
    main()
