"""What two write-side reads cost, each next to its former rule in the same run: a NODE_SYNC of
unchanged objects (the relay re-read their MENTIONS every time; now only for new, deleted or
rewritten nodes), and the memory metrics' summary lag (a pass over every session; now an index
on the sessions past the window, migration 0024).

NODE_SYNC: `--roots` documents of `--parts` parts, each part naming `--names` of a pool of
entities, written by COPY and projected once; then every root gets a NODE_SYNC with nothing
changed, applied by the relay with the former rule (every NODE_SYNC root re-syncs its MENTIONS)
and with the current one, `--rounds` times each, alternating. Summary lag: `--sessions` live
sessions within the window and 10 past it; `read_memory_backlog` timed `--scrapes` times with
the index and with it dropped (inside a transaction rolled back afterwards), with the buffers
each plan reads.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from bench.harness.inprocess import bench_settings, bench_stack
from bench.harness.runenv import bench_parser, emit_report, log, machine_lines, quiet_logging
from bench.harness.timing import percentile
from pipeline.domain.projection import NodeState
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.kafka.io import KafkaChangeSink, make_producer
from pipeline.ops.memory import SUMMARY_LAG, read_memory_backlog
from pipeline.outbox import store as outbox
from pipeline.outbox.ops import ENTITY_SYNC, MENTIONS_SYNC, NODE_SYNC
from pipeline.outbox.relay import OutboxRelay
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings

PORT_OFFSET = 1950
NS = uuid.UUID("00000000-0000-4000-8000-0000000c0575")
WINDOW = 12


class FormerRuleRelay(OutboxRelay):
    """The relay as it was: every NODE_SYNC root re-syncs its MENTIONS."""

    def _mentions_follow_node(self, upserts: Sequence[NodeState], deletes: Sequence[str]
                              ) -> set[uuid.UUID]:
        return {uuid.UUID(n.id) for n in upserts} | {uuid.UUID(d) for d in deletes}


def load_documents(settings: Settings, roots: int, parts: int, names: int,
                   rng: random.Random) -> list[uuid.UUID]:
    """The documents, their parts, entities and mentions (COPY), all projected once."""
    ids = [uuid.uuid4() for _ in range(roots)]
    entities = [uuid.uuid4() for _ in range(max(roots, 10))]
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn, \
            conn.cursor() as cur:
        with cur.copy("COPY objects (id, namespace_id, kind, title) FROM STDIN") as cp:
            for r in ids:
                cp.write_row((r, NS, "note", "document"))
        part_rows = [(uuid.uuid4(), r, i) for r in ids for i in range(parts)]
        with cur.copy("COPY objects (id, namespace_id, kind, parent_id, position, content)"
                      " FROM STDIN") as cp:
            for part, root, i in part_rows:
                cp.write_row((part, NS, "note", root, i, "x" * 300))
        # done without a vector, as the rows were before: the relay projects them at once
        cur.execute("UPDATE object_embeddings SET embed_status = 'done' WHERE namespace_id = %s",
                    (NS,))
        with cur.copy("COPY entities (id, namespace_id, name, norm, label, part_count)"
                      " FROM STDIN") as cp:
            for i, e in enumerate(entities):
                cp.write_row((e, NS, f"E{i}", f"e{i}", "NAME", 1))
        with cur.copy("COPY mentions (row_id, field, start_pos, end_pos, namespace_id,"
                      " entity_id, label, text) FROM STDIN") as cp:
            for part, _, _ in part_rows:
                for j, e in enumerate(rng.sample(entities, names)):
                    cp.write_row((part, "content", 10 * j, 10 * j + 5, NS, e, "NAME", "xxxxx"))
        cur.execute("ANALYZE")
        outbox.enqueue_many(conn, [outbox.Entry(NS, r, op) for r in ids
                                   for op in (NODE_SYNC, MENTIONS_SYNC)]
                            + [outbox.Entry(NS, e, ENTITY_SYNC) for e in entities])
    return ids


def relay_seconds(settings: Settings, relay_class: type[OutboxRelay], roots: list[uuid.UUID]
                  ) -> float:
    """Enqueue a NODE_SYNC of every root and time the relay applying them."""
    pool = make_pool(settings, max_size=2)
    producer = make_producer(settings)
    try:
        with pool.connection() as conn:
            outbox.enqueue_many(conn, [outbox.Entry(NS, r, NODE_SYNC) for r in roots])
        relay = relay_class(settings, pool, FalkorGraphWriter.from_settings(settings),
                            KafkaChangeSink(producer, settings.topic_changes))
        started = time.perf_counter()
        stats = relay.run()
        elapsed = time.perf_counter() - started
        assert stats.rows == len(roots) and not stats.mentions_upserted, stats
        return elapsed
    finally:
        producer.close()
        pool.close()


def node_sync_rows(settings: Settings, roots: list[uuid.UUID], rounds: int) -> list[str]:
    pool = make_pool(settings, max_size=2)
    producer = make_producer(settings)
    try:  # the first projection: nodes, MENTIONS, entities
        OutboxRelay(settings, pool, FalkorGraphWriter.from_settings(settings),
                    KafkaChangeSink(producer, settings.topic_changes)).run()
    finally:
        producer.close()
        pool.close()
    times: dict[str, list[float]] = {"former": [], "current": []}
    for _ in range(rounds):
        times["former"].append(relay_seconds(settings, FormerRuleRelay, roots))
        times["current"].append(relay_seconds(settings, OutboxRelay, roots))
    base = percentile(times["former"], 50)
    return [f"| NODE_SYNC of {len(roots)} unchanged objects, {rule} rule | "
            f"{percentile(t, 50) * 1000:.0f} ms | {percentile(t, 50) / base:.2f} | - |"
            for rule, t in times.items()]


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
    parser.add_argument("--roots", type=int, default=300, help="documents")
    parser.add_argument("--parts", type=int, default=4, help="parts per document")
    parser.add_argument("--names", type=int, default=5, help="entities named per part")
    parser.add_argument("--rounds", type=int, default=5, help="relay runs per rule")
    parser.add_argument("--sessions", type=int, default=100_000, help="memory sessions")
    parser.add_argument("--scrapes", type=int, default=20, help="backlog reads per variant")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    quiet_logging()
    settings = bench_settings("writecost", PORT_OFFSET, "static")
    with bench_stack(settings, fresh=True):
        log(f"loading {args.roots} documents ...")
        roots = load_documents(settings, args.roots, args.parts, args.names,
                               random.Random(11))
        rows = node_sync_rows(settings, roots, args.rounds)
        log(f"loading {args.sessions} sessions ...")
        rows += lag_rows(settings, args.sessions, args.scrapes)
    text = "\n".join([
        "# Write-side reads: NODE_SYNC's MENTIONS and the memory summary lag", "",
        *machine_lines(), "",
        f"{args.roots} documents x {args.parts} parts x {args.names} names; relay medians of "
        f"{args.rounds} runs per rule, alternating; backlog medians of {args.scrapes} reads. "
        "Ratio: against the former rule, same run.", "",
        "| what | median | ratio | plan (lag statement) |",
        "|------|--------|-------|----------------------|",
        *rows])
    emit_report(text, args.out)


if __name__ == "__main__":
    main()
