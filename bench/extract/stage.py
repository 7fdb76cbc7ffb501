"""The extraction STAGE against the embedding stage, on the real stack (bench/extract's "stage"
rows).

SciFact documents go in through the consumer's write path (`apply_batch`), which leaves every
row pending for extraction and for embedding. Then, in this process and one after the other on
the same rows: the extraction stage (`ExtractionStage` with the heuristic extractor, as the
worker builds it: claim, extract, write mentions, entities, aliases, counts and edges back,
enqueue the outbox, commit), the resolver's proposal pass over the entities it created (the
worker's extract task runs it after the stage; a row of its own) and the embedding stage
(`EmbeddingService` with the static embedder, the worker's embed path: claim, embed, write
vectors into the HNSW-indexed table, enqueue the outbox, commit). Each is timed from its first
claim to its last commit, in rows/s and rows per CPU-second of this process and of the
database server (the write-back's work is mostly the server's; the bare embed call's CPU is
this process's only).

"Extraction is never the ingest bottleneck" means extraction keeps up with embedding: the
stage and the proposal pass together (what the extract worker's task runs; a row of their own)
at least the embedding stage's rate in rows/s and in rows per CPU-second (PASS), so a backlog of
extraction cannot grow while embedding keeps up. The pass writes the new entities' name
vectors (HNSW-indexed, migration 0041) before it examines them, as in the worker. The share of
HOT updates of `entities` during the stage and the proposal pass after it is reported: an update
that is not HOT re-inserts the entity into every index of the table. The bare embed call (static
embedder, the same texts, no database) is shown too: an upper bound of any embedding stage.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import psutil
from psycopg_pool import ConnectionPool

from bench.harness.inprocess import apply_events, bench_settings, bench_stack
from bench.harness.runenv import log
from bench.ingest.corpus import cycle_docs, load_corpus, put_envelope
from pipeline.embedding.embedders import StaticEmbedder
from pipeline.embedding.service import EmbeddingService
from pipeline.entities.extractors import MAX_MENTIONS_PER_ROW
from pipeline.entities.extractors.heuristic import HeuristicExtractor
from pipeline.entities.merging import PROPOSAL_BATCH, propose_all
from pipeline.entities.resolving import ResolveConfig
from pipeline.entities.stage import ExtractionStage
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings

PORT_OFFSET = 1700
NAMESPACE = uuid.UUID("9d3c1f0a-5b7e-4c2d-8a6f-1e0b2c3d4e5f")


@dataclass
class StageRow:
    name: str
    rows: int
    seconds: float
    cpu_seconds: float  # this process and the Postgres server together

    @property
    def per_second(self) -> float:
        return self.rows / self.seconds

    @property
    def per_cpu_second(self) -> float:
        return self.rows / self.cpu_seconds


def _postgres_cpu(settings: Settings) -> float:
    """CPU seconds spent so far by the Postgres server processes of this stack (the
    postmaster's tree: backends are forked per connection)."""
    pidfile = settings.resolved_data_dir / "postgres" / "postmaster.pid"
    root = psutil.Process(int(pidfile.read_text().split()[0]))
    total = 0.0
    for proc in [root, *root.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def _timed(settings: Settings | None, run: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process and, given `settings`, of its Postgres)."""
    def server() -> float:
        return _postgres_cpu(settings) if settings is not None else 0.0

    wall, cpu, before = time.perf_counter(), time.process_time(), server()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu + server() - before


def _entity_updates(pool: ConnectionPool) -> tuple[int, int]:
    """(updates, HOT updates) of `entities` so far, once every session's statistics arrived
    (a backend reports them when idle, at most about a second late: read until they hold)."""
    last: tuple[int, int] | None = None
    while True:
        with pool.connection() as conn:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
                               " WHERE relname = 'entities'").fetchone()
        assert row is not None
        now = (int(row[0]), int(row[1]))
        if now == last:
            return now
        last = now
        time.sleep(1.5)


def stage_rows(docs: int, fresh: bool = True, port_offset: int = PORT_OFFSET
               ) -> tuple[list[StageRow], dict[str, float]]:
    """Ingest `docs` SciFact documents and run both stages over their rows; the rows of the
    table and the write-back's own figures (mentions per row, entities, HOT share)."""
    suffix = "" if port_offset == PORT_OFFSET else f"-{port_offset}"
    settings = bench_settings("extract-stage" + suffix, port_offset, "static")
    with bench_stack(settings, fresh=fresh):
        corpus = load_corpus()
        events = [put_envelope(NAMESPACE, key, doc) for key, doc in cycle_docs(corpus, docs)]
        log(f"applying {len(events)} SciFact documents")
        apply_events(settings, events)
        pool = make_pool(settings, max_size=2)
        try:
            extractor = HeuristicExtractor(max_mentions=MAX_MENTIONS_PER_ROW)
            embedder = StaticEmbedder()
            embedder.embed(["warm the model up"])
            stage = ExtractionStage(settings, pool, extractor)
            counted: dict[str, int] = {}

            def extract() -> None:
                stats = stage.run(max_batches=1_000_000)
                counted.update(rows=stats.extracted + stats.failed, mentions=stats.mentions,
                               entities=stats.entities_created)

            def propose() -> None:
                # entity names are embedded by the pass, as in the worker (rt.name_embedder)
                stats = propose_all(pool, batch=PROPOSAL_BATCH,
                                    config=ResolveConfig.from_settings(settings),
                                    names=embedder, max_rounds=1_000_000)
                counted["examined"] = stats.examined

            log("extraction stage")
            updates_before = _entity_updates(pool)
            x_wall, x_cpu = _timed(settings, extract)
            log("proposal pass")
            p_wall, p_cpu = _timed(settings, propose)
            updates_after = _entity_updates(pool)
            service = EmbeddingService(settings, pool, embedder)

            def embed() -> None:
                stats = service.run(max_batches=1_000_000)
                counted["embedded"] = stats.embedded + stats.failed

            log("embedding stage")
            e_wall, e_cpu = _timed(settings, embed)
            with pool.connection() as conn:
                texts = [t for (t,) in conn.execute(
                    "SELECT coalesce(title, '') || ' ' || coalesce(content, '') FROM objects"
                    " WHERE namespace_id = %s", (NAMESPACE,)).fetchall()]
        finally:
            pool.close()
        step = settings.embed_batch_size

        def bare() -> None:
            for i in range(0, len(texts), step):
                embedder.embed(texts[i:i + step])

        b_wall, b_cpu = _timed(None, bare)  # no database: this process only
    rows = [StageRow("embedding stage, static (baseline)", counted["embedded"], e_wall, e_cpu),
            StageRow("extraction stage, heuristic", counted["rows"], x_wall, x_cpu),
            # rows: the extraction rows whose entities it examined (per-row rate, as the others)
            StageRow(f"proposal pass, name vectors included ({counted['examined']} entities"
                     " examined)",
                     counted["rows"], p_wall, p_cpu),
            # what the extract worker's task runs: the stage, then the pass over what it made
            StageRow("extraction, stage + proposal pass (the extract worker)", counted["rows"],
                     x_wall + p_wall, x_cpu + p_cpu),
            StageRow("bare embed call, static", len(texts), b_wall, b_cpu)]
    figures = {"mentions/row": counted["mentions"] / max(counted["rows"], 1),
               "entities": float(counted["entities"]),
               "updates": float(updates_after[0] - updates_before[0]),
               "hot": float(updates_after[1] - updates_before[1])}
    return rows, figures


def stage_report(rows: list[StageRow], figures: dict[str, float]) -> list[str]:
    """The stage table and its verdict, as Markdown lines."""
    base, cpu_base = rows[0].per_second, rows[0].per_cpu_second
    lines = ["Stage: the full stage on the real stack, first claim to last commit (rows = the "
             "objects rows, roots and parts); CPU = this process and the Postgres server.", "",
             "| stage | rows | rows/s | ratio | rows/CPU-s | ratio |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.name} | {r.rows} | {r.per_second:,.0f} | {r.per_second / base:.2f} | "
                     f"{r.per_cpu_second:,.0f} | {r.per_cpu_second / cpu_base:.2f} |")
    worker = rows[3]  # the stage and the proposal pass together
    ratio, cpu_ratio = worker.per_second / base, worker.per_cpu_second / cpu_base
    # Both must hold: rows/s alone moves with whatever else loads the machine, and the CPU
    # figure is what the two stages cost when they share one.
    verdict = "PASS" if min(ratio, cpu_ratio) >= 1.0 else "FAIL"
    lines += ["", f"{verdict}: extraction (the stage and the proposal pass, as the extract "
              f"worker runs them) at {ratio:.2f}x the embedding stage's rows/s and "
              f"{cpu_ratio:.2f}x its rows/CPU-s (never the ingest bottleneck = extraction rate "
              f">= embedding rate, both); {figures['mentions/row']:.1f} mentions per row, "
              f"{figures['entities']:.0f} entities created.", "",
              f"`entities` during the stage and the proposal pass: "
              f"{figures['hot']:.0f} of "
              f"{figures['updates']:.0f} updates HOT "
              f"({figures['hot'] / max(figures['updates'], 1.0):.1%})."]
    return lines
