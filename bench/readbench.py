"""Shared plumbing of the read-side benchmarks (`bench/quality.py`, `bench/query.py`).

Each benchmark runs its own embedded stack (data dir `.brainstream-bench/<name>`, every default
port moved by a fixed offset, all below 32768), writes through the real write path in-process
(`apply_batch`, then `EmbeddingService`, then `OutboxRelay`: what the consumer, the embedding
workers and the relay do, minus the broker hop on the input side), reads through the engine as
`api.wiring.build_services` wires it, and stops the stack in a `finally`.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from harness import code_version, load_average, machine, percentile

from pipeline.domain.settings import EmbedderName, Settings
from pipeline.embedding.service import EmbeddingService, pending_count
from pipeline.graph.falkordb.schema import prepare_graph
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.ingest.batch import RawRecord, apply_batch
from pipeline.ingest.processor import ingest_options
from pipeline.kafka.io import KafkaChangeSink, make_producer
from pipeline.kafka.topics import ensure_topics
from pipeline.ops.migrations import apply_migrations
from pipeline.outbox.relay import OutboxRelay, backlog
from pipeline.ports import Embedder
from pipeline.services.stack import Stack
from pipeline.stores.postgres.events import PgEventStore
from pipeline.stores.postgres.pool import make_pool

__all__ = ["code_version", "load_average", "machine", "percentile"]

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO.parent / "shared" / "datasets"
BENCH_DIR = REPO / ".brainstream-bench"

# The project's default ports (pipeline/domain/settings.py); a benchmark moves them by its offset.
DEFAULT_PORTS = {"pg_port": 15432, "kafka_port": 19092, "s3_port": 19000,
                 "falkordb_port": 16379, "redis_port": 16380}

T = TypeVar("T")
R = TypeVar("R")


def log(message: str) -> None:
    """Progress on stderr (the report goes to stdout)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def bench_settings(name: str, offset: int, embedder: EmbedderName,
                   **overrides: Any) -> Settings:
    """Settings of a benchmark stack: own data dir, ports = defaults + offset, no environment
    variable or .env consulted (model_validate, not the constructor)."""
    ports = {key: port + offset for key, port in DEFAULT_PORTS.items()}
    if max(ports.values()) >= 32768:
        raise ValueError("benchmark ports must stay below 32768 (ephemeral range)")
    return Settings.model_validate({"data_dir": BENCH_DIR / name, "embedder": embedder,
                                    **ports, **overrides})


@contextmanager
def bench_stack(settings: Settings, *, fresh: bool) -> Iterator[Stack]:
    """Start the stack (wiped first when `fresh`), migrate it, and always stop it afterwards."""
    stack = Stack(settings)
    stack.stop()  # whatever an interrupted earlier run left on this data dir
    if fresh:
        shutil.rmtree(settings.resolved_data_dir, ignore_errors=True)
    try:
        stack.start(report=lambda line: log(f"stack: {line}"))
        apply_migrations(settings)
        prepare_graph(settings)
        ensure_topics(settings)
        yield stack
    finally:
        stack.stop(report=lambda line: log(f"stack: {line}"))


# -- write path ------------------------------------------------------------------------------


def apply_events(settings: Settings, events: Sequence[dict[str, Any]], *,
                 batch_size: int | None = None) -> int:
    """Apply put/link events as the consumer does: one transaction per batch of records."""
    size = batch_size or settings.consumer_batch_size
    options = ingest_options(settings)
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
    producer = make_producer(settings, enable_idempotence=False)
    try:
        service = EmbeddingService(settings, pool, embedder)
        embedded = 0
        started = last = time.perf_counter()
        while True:
            stats = service.run(max_batches=5)
            embedded += stats.embedded + stats.failed
            if stats.failed:
                raise RuntimeError(f"{stats.failed} rows failed to embed")
            if stats.claimed == 0:
                break
            if time.perf_counter() - last > progress_every:
                last = time.perf_counter()
                rate = embedded / (last - started)
                log(f"embedded {embedded} rows ({rate:.0f}/s), {pending_count(pool)} pending")
        embed_s = time.perf_counter() - started
        relay = OutboxRelay(settings, pool, FalkorGraphWriter.from_settings(settings),
                            KafkaChangeSink(producer, settings.topic_changes))
        started = time.perf_counter()
        while True:
            stats_r = relay.run()
            if stats_r.failed_rounds:
                raise RuntimeError(f"relay failed: {stats_r.errors[:1]}")
            if backlog(pool) == 0:
                break
        relay_s = time.perf_counter() - started
        return embedded, embed_s, relay_s
    finally:
        producer.close()
        pool.close()


# -- timing ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """Latencies (seconds) of `count` calls made by `concurrency` workers in `wall` seconds."""

    name: str
    concurrency: int
    latencies: tuple[float, ...]
    wall: float
    errors: int = 0

    @property
    def count(self) -> int:
        return len(self.latencies)

    def ms(self, q: float) -> float:
        """The q-th percentile latency in milliseconds."""
        return percentile(self.latencies, q) * 1000.0

    @property
    def throughput(self) -> float:
        """Calls per second over the run's wall time."""
        return self.count / self.wall if self.wall > 0 else 0.0


async def run_concurrent(name: str, call: Callable[[T], Awaitable[object]],
                         inputs: Sequence[T], concurrency: int,
                         budget: float | None = None) -> Timing:
    """Call `call` on every input with `concurrency` workers pulling from one queue; each call's
    latency is measured around its await, the wall time from the first start to the last end.
    With a `budget` (seconds), no call starts after it ran out (so a very slow operation is
    measured on fewer calls instead of stalling the benchmark)."""
    queue: asyncio.Queue[T] = asyncio.Queue()
    for item in inputs:
        queue.put_nowait(item)
    latencies: list[float] = []
    errors = 0

    async def worker() -> None:
        nonlocal errors
        while True:
            if deadline is not None and time.perf_counter() > deadline:
                return
            try:
                item = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            start = time.perf_counter()
            try:
                await call(item)
            except Exception as exc:  # counted and shown once; a benchmark must not hide them
                errors += 1
                if errors == 1:
                    log(f"{name}: first error: {exc!r}")
                continue
            latencies.append(time.perf_counter() - start)

    started = time.perf_counter()
    deadline = None if budget is None else started + budget
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - started
    return Timing(name, concurrency, tuple(latencies), wall, errors)


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


def machine_lines() -> list[str]:
    """What and when the figures were measured on, as Markdown bullet lines."""
    info = machine()
    return [f"- {key}: {value}" for key, value in info.items()] + [
        f"- code: {code_version()}", f"- load average (1 min) at start: {load_average()}"]


def batched(items: Sequence[R], size: int) -> Iterator[Sequence[R]]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield items[start:start + size]
