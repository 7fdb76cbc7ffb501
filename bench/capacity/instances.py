"""What one instance of each processing component does, for the capacity benchmark, each as
CPU per unit (this process, and Postgres apart) and as wall time:

- a consumer: SciFact put events applied as the consumer applies them (`apply_batch`, one
  transaction per batch of `CONSUMER_BATCH_SIZE`), without the broker hop;
- an embedding worker: `EmbeddingService` on the rows those events left pending, with the static
  embedder (its 256 dimensions zero-padded to the database's 384: the same arithmetic) and
  with MiniLM on one torch thread, as a worker process runs it;
- an API core: `search` (mode hybrid, Tantivy lexical channel) through the engine as
  `build_services` wires it, concurrency 1, on SciFact claims; the query's MiniLM encode alone
  on the same claims, so its share is known.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bench.harness.inprocess import apply_events
from bench.harness.runenv import log
from bench.ingest.corpus import cycle_docs, load_corpus, object_id, put_envelope
from bench.ingest.leanwrites import postgres_cpu
from pipeline.domain.read_model import SearchQuery
from pipeline.embedding.embedders.minilm import MiniLMEmbedder
from pipeline.embedding.embedders.static import StaticEmbedder
from pipeline.embedding.service import EmbeddingService
from pipeline.ports import Embedder, Vectors
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from pipeline.wiring import build_services

CONSUMER_NS = uuid.uuid5(uuid.NAMESPACE_URL, "brainstream-bench/capacity/consumer")
MINILM_NS = uuid.uuid5(uuid.NAMESPACE_URL, "brainstream-bench/capacity/minilm")
REAP_S = 1.0


@dataclass(frozen=True)
class Meter:
    """One measured run: units done, wall seconds, CPU seconds of this process and of
    Postgres."""

    what: str
    units: int
    wall_s: float
    cpu_s: float
    pg_cpu_s: float

    def per_unit_ms(self) -> tuple[float, float, float]:
        """(wall, own CPU, Postgres CPU) milliseconds per unit."""
        n = max(self.units, 1)
        return 1000 * self.wall_s / n, 1000 * self.cpu_s / n, 1000 * self.pg_cpu_s / n


def metered(what: str, postmaster: int, run: Callable[[], int]) -> Meter:
    """Run `run` (it returns the units it did) under the three clocks."""
    wall, cpu, pg = time.perf_counter(), time.process_time(), postgres_cpu(postmaster)
    units = run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    # a backend whose connection `run` closed counts in the postmaster's children times only
    # once reaped: give the postmaster that moment (outside the timing)
    time.sleep(REAP_S)
    return Meter(what, units, wall, cpu, postgres_cpu(postmaster) - pg)


class PaddedStatic(StaticEmbedder):
    """The static embedder's vectors zero-padded to `dim`: the static model's CPU, stored in the
    database's wider column (a padded unit vector stays a unit vector)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim
        self.identity += f" zero-padded to {dim}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        """The static vectors with zeros appended."""
        vectors = super().embed(texts)
        return np.pad(vectors, ((0, 0), (0, self.dim - vectors.shape[1])))


def consumer(settings: Settings, postmaster: int, docs: int) -> Meter:
    """Apply `docs` SciFact put events as the consumer does."""
    events = [put_envelope(CONSUMER_NS, key, doc) for key, doc in
              cycle_docs(load_corpus(), docs)]
    log(f"consumer: applying {len(events)} put events")
    return metered(f"consumer: put events applied ({len(events)})", postmaster,
                   lambda: apply_events(settings, events))


def embedding_stage(settings: Settings, postmaster: int, embedder: Embedder, what: str,
                    roots: Sequence[uuid.UUID] | None = None) -> Meter:
    """Embed the rows pending (of `roots`, or all) with the real stage until none is left."""
    pool = make_pool(settings, max_size=2, name="bench-capacity-embed")
    try:
        service = EmbeddingService(settings, pool, embedder)

        def run() -> int:
            rows = 0
            while True:
                stats = service.run(roots, max_batches=5)
                if stats.failed:
                    raise RuntimeError(f"{stats.failed} rows failed to embed")
                rows += stats.embedded
                if not stats.claimed:
                    return rows

        log(f"embedding: {what} ...")
        return metered(what, postmaster, run)
    finally:
        pool.close()


def minilm_stage(settings: Settings, postmaster: int, docs: int) -> Meter:
    """Apply `docs` more SciFact documents and embed their rows with MiniLM (one thread)."""
    keyed = cycle_docs(load_corpus()[-docs:], docs)
    apply_events(settings, [put_envelope(MINILM_NS, key, doc) for key, doc in keyed])
    embedder = MiniLMEmbedder(num_threads=1)
    embedder.embed(["warm-up: the model loads outside the timing"])
    return embedding_stage(settings, postmaster, embedder,
                           "embedding worker: MiniLM, one torch thread, rows",
                           [object_id(MINILM_NS, key) for key, _ in keyed])


def searches(settings: Settings, postmaster: int, namespace: uuid.UUID, claims: list[str]
             ) -> tuple[Meter, Meter]:
    """`search` at concurrency 1 on `claims`, and the query encode alone on the same claims."""
    async def run() -> tuple[Meter, Meter]:
        services = await build_services(settings)
        try:
            while services.embedder is None:  # the query embedder loads in the background
                await asyncio.sleep(0.1)
            embedder = services.embedder
            for claim in claims[:10]:  # warm-up: caches, the pool, the model
                await services.engine.search(namespace, SearchQuery(claim, limit=10))
            wall, cpu, pg = time.perf_counter(), time.process_time(), postgres_cpu(postmaster)
            for claim in claims:
                await services.engine.search(namespace, SearchQuery(claim, limit=10))
            search = Meter("API: search, mode hybrid, c=1", len(claims),
                           time.perf_counter() - wall, time.process_time() - cpu,
                           postgres_cpu(postmaster) - pg)
            wall, cpu = time.perf_counter(), time.process_time()
            for claim in claims:
                embedder.embed([claim])
            encode = Meter(f"API: the query's encode alone ({embedder.name})", len(claims),
                           time.perf_counter() - wall, time.process_time() - cpu, 0.0)
            return search, encode
        finally:
            await services.close()

    log(f"search: {len(claims)} claims at concurrency 1 ...")
    return asyncio.run(run())
