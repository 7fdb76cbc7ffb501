"""Per-process resources of a worker, created lazily after Celery forks its pool processes
(connections and producers must not cross a fork), for the active index generation: every task
asks `runtime()`, which re-reads the generation pointer (at most once a second) and rebuilds the
resources when a replay switched generations, so embedding, extraction, the relay and the sweep
follow."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from kafka import KafkaProducer
from psycopg_pool import ConnectionPool

from pipeline.domain.settings import Settings, load_settings
from pipeline.embedding.embedders import build_embedder
from pipeline.entities.extractors import build_extractor
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.ingest.processor import BatchProcessor
from pipeline.kafka.io import DeadLetterWriter, KafkaChangeSink, make_producer
from pipeline.ops.generations import ActivePointer
from pipeline.ports import Embedder, Extractor
from pipeline.stores.postgres.events import PgEventStores
from pipeline.stores.postgres.pool import make_pool


@dataclass
class Runtime:
    settings: Settings
    pool: ConnectionPool
    producer: KafkaProducer
    embedder: Embedder
    dead_letters: DeadLetterWriter
    changes: KafkaChangeSink
    processor: BatchProcessor  # for deferred events that come due between batches
    _graph: FalkorGraphWriter | None = None
    _extractor: Extractor | None = None

    @property
    def graph(self) -> FalkorGraphWriter:
        """Connected on first use: embedding must not need the graph to be up."""
        if self._graph is None:
            self._graph = FalkorGraphWriter.from_settings(self.settings)
        return self._graph

    @property
    def extractor(self) -> Extractor:
        """Built on first use: a model-backed extractor loads in seconds, and embedding and the
        relay must not wait for it (nor fail when its settings are wrong)."""
        if self._extractor is None:
            self._extractor = build_extractor(self.settings)
        return self._extractor


_lock = threading.Lock()
_runtime: Runtime | None = None
_pointer: ActivePointer | None = None
_pid: int | None = None


def runtime() -> Runtime:
    """This process's resources for the active generation (re-created in a forked child and
    after a switch)."""
    global _runtime, _pointer, _pid
    with _lock:
        if _pointer is None or _pid != os.getpid():
            _pointer = ActivePointer(load_settings(), ttl=1.0)
            _runtime = None  # the parent's connections must not be used after a fork
            _pid = os.getpid()
        gen = _pointer.current()
        if _runtime is None or _runtime.settings.generation != gen.id:
            previous = _runtime
            _runtime = _build(gen.settings(_pointer.base), previous)
            if previous is not None:
                # Celery's prefork pool runs one task at a time per process: nothing else
                # uses the old generation's connections now
                previous.pool.close()
                previous.producer.close()
        return _runtime


def _build(settings: Settings, previous: Runtime | None) -> Runtime:
    from workers.app import app
    from workers.triggers import CeleryTrigger

    producer = make_producer(settings)
    pool = make_pool(settings, min_size=1, max_size=4, name="brainstream-worker")
    dead_letters = DeadLetterWriter(producer, settings.topic_dlq)
    if previous is not None and previous.settings.embedder == settings.embedder \
            and previous.settings.vector_dim == settings.vector_dim:
        embedder = previous.embedder  # loading a model takes seconds: keep the same one
    else:
        # one torch thread per pool process: N processes x default threads would
        # oversubscribe the cores (measured: 89 vs 72 ms CPU per MiniLM passage)
        embedder = build_embedder(settings, num_threads=max(
            1, (os.cpu_count() or 1) // settings.worker_concurrency))
    return Runtime(
        settings=settings,
        pool=pool,
        producer=producer,
        embedder=embedder,
        dead_letters=dead_letters,
        changes=KafkaChangeSink(producer, settings.topic_changes),
        processor=BatchProcessor(settings, PgEventStores(pool), dead_letters,
                                 CeleryTrigger(app), give_up_after=30.0),
    )
