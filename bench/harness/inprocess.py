"""Shared plumbing of the read-side benchmarks (`bench/quality`, `bench/query`, `bench/multihop`),
also used by the write-side ones that run in-process (`bench/ingest/leanwrites.py`,
`bench/ingest/writecost.py`, `bench/extract/stage.py`).

Each benchmark runs its own embedded stack (data dir `.brainstream-bench/<name>`, every default
port moved by a fixed offset, all below 32768), writes through the real write path in-process
(`apply_batch`, then `EmbeddingService`, then `OutboxRelay`: what the consumer, the embedding
workers and the relay do, minus the broker hop on the input side), reads through the engine as
`pipeline.wiring.build_services` wires it, and stops the stack in a `finally`.
"""

from __future__ import annotations

import json
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from bench.harness.runenv import BENCH_DIR, log
from pipeline.embedding.service import EmbeddingService
from pipeline.embedding.settings import EmbedderName
from pipeline.entities.stage import ExtractionStage
from pipeline.graph.falkordb.schema import prepare_graph
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import IngestOptions, RawRecord, ingest_options
from pipeline.ingest.settings import CONSUMER_BATCH_SIZE
from pipeline.ingest.store.events import PgEventStore
from pipeline.kafka.io import KafkaChangeSink, make_producer
from pipeline.kafka.topics import ensure_topics
from pipeline.ops.migrations import apply_migrations
from pipeline.outbox.relay import OutboxRelay
from pipeline.outbox.store import backlog
from pipeline.ports import Embedder
from pipeline.postgres.pool import make_pool
from pipeline.services.stack import Stack
from pipeline.settings import Settings

# The project's default ports (pipeline/services/settings.py); a benchmark moves them by its offset.
DEFAULT_PORTS = {"pg_port": 15432, "kafka_port": 19092, "s3_port": 19000,
                 "falkordb_port": 16379, "redis_port": 16380}


def bench_settings(name: str, offset: int, embedder: EmbedderName,
                   **overrides: Any) -> Settings:
    """Settings of a benchmark stack: own data dir, ports = defaults + offset; BRAINSTREAM_*
    environment variables still apply to everything else (pydantic-settings reads them in
    `model_validate` too), e.g. `BRAINSTREAM_LEXICAL_ENGINE=tantivy` for the wired engine."""
    ports = {key: port + offset for key, port in DEFAULT_PORTS.items()}
    if max(ports.values()) >= 32768:
        raise ValueError("benchmark ports must stay below 32768 (ephemeral range)")
    return Settings.model_validate({"data_dir": BENCH_DIR / name, "embedder": embedder,
                                    **ports, **overrides})


@contextmanager
def bench_stack(settings: Settings, *, fresh: bool, sql_postings: bool = False
                ) -> Iterator[Stack]:
    """Start the stack (wiped first when `fresh`), migrate it, and always stop it afterwards.
    With `sql_postings` the database keeps the SQL BM25 postings and vocabulary whatever
    `settings.lexical_engine` says (migrated as LEXICAL_ENGINE=postgres: a benchmark that
    measures the SQL lexical channel beside Tantivy needs them)."""
    stack = Stack(settings)
    stack.stop()  # whatever an interrupted earlier run left on this data dir
    if fresh:
        shutil.rmtree(settings.resolved_data_dir, ignore_errors=True)
    # a benchmark stopped with SIGTERM (kill, timeout) stops its services too: without this
    # the signal ended the process at once and left them running, holding their ports
    previous = (signal.signal(signal.SIGTERM, _exit_on_term)
                if threading.current_thread() is threading.main_thread() else None)
    try:
        stack.start(report=lambda line: log(f"stack: {line}"))
        apply_migrations(settings.model_copy(update={"lexical_engine": "postgres"})
                         if sql_postings else settings)
        prepare_graph(settings)
        ensure_topics(settings)
        yield stack
    finally:
        stack.stop(report=lambda line: log(f"stack: {line}"))
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _exit_on_term(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


# -- write path ------------------------------------------------------------------------------


def apply_events(settings: Settings, events: Sequence[dict[str, Any]], *,
                 batch_size: int | None = None, options: IngestOptions | None = None) -> int:
    """Apply put/link events as the consumer does: one transaction per batch of records (with
    the settings' options unless given)."""
    size = batch_size or CONSUMER_BATCH_SIZE
    options = options or ingest_options(settings)
    applied = 0
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        for start in range(0, len(events), size):
            chunk = events[start:start + size]
            records = [RawRecord(settings.topic_events, 0, start + i, None,
                                 json.dumps(e).encode()) for i, e in enumerate(chunk)]
            with conn.transaction():
                outcome = apply_batch(PgEventStore(conn), records, options)
            if outcome.dead:
                first = outcome.dead[0].error.to_dict()
                raise RuntimeError(f"{len(outcome.dead)} events dead-lettered, first: {first}")
            applied += outcome.applied
    return applied


def embed_and_relay(settings: Settings, embedder: Embedder, *, progress_every: float = 30.0
                    ) -> tuple[int, float, float]:
    """Embed every pending row (EmbeddingService) and project the outbox into the graph
    (OutboxRelay, change events to Kafka). Returns (rows embedded, embed s, relay s)."""
    pool = make_pool(settings, max_size=2)
    try:
        service = EmbeddingService(settings, pool, embedder)

        def step() -> tuple[int, int]:
            stats = service.run(max_batches=5)
            if stats.failed:
                raise RuntimeError(f"{stats.failed} rows failed to embed")
            return stats.embedded, stats.claimed

        embedded, embed_s = run_until_idle(step, "embedded", progress_every=progress_every)
    finally:
        pool.close()
    return embedded, embed_s, drain_outbox(settings)


def drain_outbox(settings: Settings, *, rounds: int = 1000, progress: bool = False) -> float:
    """Project the outbox into FalkorDB with the real relay (change events to Kafka), `rounds`
    batches per pass, until nothing is left; seconds taken. `progress` logs the rows left after
    each pass."""
    pool = make_pool(settings, max_size=2)
    producer = make_producer(settings, enable_idempotence=False)
    try:
        relay = OutboxRelay(settings, pool, FalkorGraphWriter.from_settings(settings),
                            KafkaChangeSink(producer, settings.topic_changes))
        started = time.perf_counter()
        while True:
            stats = relay.run(max_rounds=rounds)
            if stats.failed_rounds:
                raise RuntimeError(f"relay failed: {stats.errors[:1]}")
            left = backlog(pool)
            if progress:
                log(f"relay: {left} outbox rows left")
            if left == 0:
                return time.perf_counter() - started
    finally:
        producer.close()
        pool.close()


def extract_pending(settings: Settings, extractor: str) -> tuple[int, float]:
    """Run the extraction stage (`ExtractionStage`, the extractor named) until no row is
    pending: (rows extracted or failed, seconds)."""
    from pipeline.entities.extractors import build_extractor  # the optional extras load late

    chosen = build_extractor(settings.model_copy(update={"entity_extractor": extractor}))
    pool = make_pool(settings, max_size=2)
    try:
        stage = ExtractionStage(settings, pool, chosen)

        def step() -> tuple[int, int]:
            stats = stage.run(max_batches=20)
            return stats.extracted + stats.failed, stats.claimed

        return run_until_idle(step, f"{extractor}: extracted", progress_every=30.0)
    finally:
        pool.close()


def run_until_idle(step: Callable[[], tuple[int, int]], what: str, *,
                   progress_every: float) -> tuple[int, float]:
    """Call `step` (one run of a stage: rows done, rows claimed) until it claims nothing,
    logging the rate every `progress_every` seconds: (rows done, seconds)."""
    rows = 0
    started = last = time.perf_counter()
    while True:
        done, claimed = step()
        rows += done
        if claimed == 0:
            return rows, time.perf_counter() - started
        if time.perf_counter() - last > progress_every:
            last = time.perf_counter()
            log(f"{what} {rows} rows ({rows / (last - started):.0f}/s)")


# -- reporting -------------------------------------------------------------------------------


def md_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table; floats get 3 decimals unless already formatted."""
    def cell(value: object) -> str:
        if isinstance(value, float):
            return f"{value:.3f}"
        return str(value)

    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
