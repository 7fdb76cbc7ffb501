"""What a write-side read costs next to its former rule in the same run: the memory metrics'
summary lag (a pass over every session; now an index on the sessions past the window, migration
0024).

`--sessions` live sessions within the window and 10 past it; `read_memory_backlog` timed
`--scrapes` times with the index and with it dropped (inside a transaction rolled back
afterwards), with the buffers each plan reads.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from bench.harness.inprocess import bench_settings, bench_stack
from bench.harness.runenv import bench_parser, emit_report, log, machine_lines, quiet_logging
from bench.harness.timing import percentile
from pipeline.ops.memory import SUMMARY_LAG, read_memory_backlog
from pipeline.settings import Settings

PORT_OFFSET = 1950
NS = uuid.UUID("00000000-0000-4000-8000-0000000c0575")
WINDOW = 12


def load_sessions(settings: Settings, sessions: int) -> None:
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO sessions (id, namespace_id, session_id, last_seq, summary_seq)"
                     " SELECT gen_random_uuid(), %s, 's' || i, 20 + i %% 13, 20"
                     " FROM generate_series(1, %s) AS i", (NS, sessions))
        conn.execute("INSERT INTO sessions (id, namespace_id, session_id, last_seq, summary_seq)"
                     " SELECT gen_random_uuid(), %s, 'behind' || i, 40, 0"
                     " FROM generate_series(1, 10) AS i", (NS,))
        conn.execute("ANALYZE sessions")


def scrape(conn: psycopg.Connection[Any], scrapes: int) -> tuple[float, str]:
    """Median seconds of `read_memory_backlog`, and the buffers its lag statement reads."""
    times = []
    for _ in range(scrapes):
        started = time.perf_counter()
        read_memory_backlog(conn, WINDOW)
        times.append(time.perf_counter() - started)
    plan = [str(r[0]) for r in conn.execute(
        "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) " + SUMMARY_LAG,
        {"w": WINDOW}).fetchall()]
    buffers = next((line.strip() for line in plan if "Buffers:" in line), "?")
    scan = next((line.strip().lstrip("-> ") for line in plan if "Scan" in line), "?")
    return percentile(times, 50), f"{scan}; {buffers}"


def lag_rows(settings: Settings, sessions: int, scrapes: int) -> list[str]:
    load_sessions(settings, sessions)
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        with conn.transaction(force_rollback=True):
            conn.execute("DROP INDEX sessions_unsummarised")
            former, former_plan = scrape(conn, scrapes)
        current, current_plan = scrape(conn, scrapes)
    return [f"| summary lag over {sessions:,} sessions, no index (former) | "
            f"{former * 1000:.2f} ms | 1.00 | {former_plan} |",
            f"| summary lag over {sessions:,} sessions, index 0024 | {current * 1000:.2f} ms | "
            f"{current / former:.2f} | {current_plan} |"]


def main() -> None:
    """Load, measure both, print the Markdown report to stdout."""
    parser = bench_parser(__doc__, "python -m bench.ingest.writecost")
    parser.add_argument("--sessions", type=int, default=100_000, help="memory sessions")
    parser.add_argument("--scrapes", type=int, default=20, help="backlog reads per variant")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    quiet_logging()
    settings = bench_settings("writecost", PORT_OFFSET, "static")
    with bench_stack(settings, fresh=True):
        log(f"loading {args.sessions} sessions ...")
        rows = lag_rows(settings, args.sessions, args.scrapes)
    text = "\n".join([
        "# Write-side reads: the memory summary lag", "",
        *machine_lines(), "",
        f"Backlog medians of {args.scrapes} reads. Ratio: against the former rule, same run.",
        "",
        "| what | median | ratio | plan (lag statement) |",
        "|------|--------|-------|----------------------|",
        *rows])
    emit_report(text, args.out)


if __name__ == "__main__":
    main()
