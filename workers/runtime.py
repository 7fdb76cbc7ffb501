"""Per-process resources of a worker, created lazily after Celery forks its pool processes
(connections and producers must not cross a fork), for the active index generation: every task
asks `runtime()`, which re-reads the generation pointer (at most once a second) and rebuilds the
resources when a replay switched generations, so embedding, extraction, the relay and the sweep
follow.

The embedder is the exception: a worker that embeds loads it as each pool process starts
(`load_embedder_at_start`), before the process takes any task, so the first document is not held
for the model's load (about 13 s for MiniLM on this machine's cores)."""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass

from kafka import KafkaProducer
from psycopg_pool import ConnectionPool

from pipeline.embedding.embedders import build_embedder, build_name_embedder, same_name_embedder
from pipeline.entities.extractors import build_extractor
from pipeline.generations.active import ActivePointer
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.ingest.processor import BatchProcessor
from pipeline.ingest.store.events import PgEventStores
from pipeline.kafka.io import DeadLetterWriter, KafkaChangeSink, make_producer
from pipeline.memory.ports import Summariser
from pipeline.memory.summarisers import build_summariser
from pipeline.ports import Embedder, Extractor
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings, load_settings


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
    _summariser: Summariser | None = None
    # the workers reuse the stored vectors of their own generation only (a replay, building
    # another generation, also reads the live one's)
    vector_source: ConnectionPool | None = None

    @property
    def graph(self) -> FalkorGraphWriter:
        """Connected on first use: embedding must not need the graph to be up."""
        if self._graph is None:
            self._graph = FalkorGraphWriter.from_settings(self.settings)
        return self._graph

    @property
    def name_embedder(self) -> Embedder:
        """The embedder of entity names (`ENTITY_NAME_EMBEDDER`): the passages' own, or the
        static one beside it."""
        return _name_embedder(self.settings)

    @property
    def summariser(self) -> Summariser:
        """Built on first use (an `http` summariser's client is kept for the process's
        generation, with its connections)."""
        if self._summariser is None:
            self._summariser = build_summariser(self.settings, self.embedder)
        return self._summariser

    @property
    def extractor(self) -> Extractor:
        """Built on first use: a model-backed extractor loads in seconds, and embedding and the
        relay must not wait for it (nor fail when its settings are wrong)."""
        if self._extractor is None:
            self._extractor = build_extractor(self.settings)
        return self._extractor


log = logging.getLogger(__name__)
_lock = threading.Lock()
_runtime: Runtime | None = None
# This process's embedders by (name, dimension): loading a model takes seconds, so one is built
# once and kept across generation switches that keep the model.
_embedders: dict[tuple[str, int], Embedder] = {}
_embedders_lock = threading.Lock()
# torch threads of this worker's embedder; None: the cores shared by its pool processes
_embed_threads: int | None = None


def embed_with_one_thread() -> None:
    """For a worker that embeds only entity names (the `extract` queue), set before its pool
    forks: it runs beside the embedding workers, whose processes already take the cores, and
    names come in short batches. With MiniLM, 1,758 SciFact names cost 3.6 ms of CPU each on one
    thread against 12.4 ms on two (and took a third of the wall time) on this 2-core machine."""
    global _embed_threads
    _embed_threads = 1
_pointer: ActivePointer | None = None
_pid: int | None = None
# the `application_name` of this process's Postgres connections: `pg_stat_activity` (and
# anything that samples it) tells the relay's connections from the embedding workers'
_pool_name = "brainstream-worker"


def name_connections(queues: str) -> None:
    """Name the pool processes' connections after the queues they consume (before they fork)."""
    global _pool_name
    _pool_name = f"brainstream-worker-{queues.replace(',', '-')}"


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
            _runtime = _build(gen.settings(_pointer.base))
            if previous is not None:
                # Celery's prefork pool runs one task at a time per process: nothing else
                # uses the old generation's connections now
                previous.pool.close()
                previous.producer.close()
        return _runtime


def _build(settings: Settings) -> Runtime:
    from workers.app import app
    from workers.triggers import CeleryTrigger

    producer = make_producer(settings)
    pool = make_pool(settings, min_size=1, max_size=4, name=_pool_name)
    dead_letters = DeadLetterWriter.of(producer, settings)
    return Runtime(
        settings=settings,
        pool=pool,
        producer=producer,
        embedder=_embedder(settings),
        dead_letters=dead_letters,
        changes=KafkaChangeSink(producer, settings.topic_changes),
        processor=BatchProcessor(settings, PgEventStores(pool), dead_letters,
                                 CeleryTrigger(app), give_up_after=30.0),
    )


def _embedder(settings: Settings) -> Embedder:
    key = (settings.embedder, settings.vector_dim)
    with _embedders_lock:
        if key not in _embedders:
            # one torch thread per pool process: N processes x default threads would
            # oversubscribe the cores (measured: 89 vs 72 ms CPU per MiniLM passage)
            _embedders[key] = build_embedder(settings, num_threads=_embed_threads or max(
                1, (os.cpu_count() or 1) // settings.worker_concurrency))
        return _embedders[key]


def _name_embedder(settings: Settings) -> Embedder:
    if same_name_embedder(settings):
        return _embedder(settings)
    key = (f"names:{settings.entity_name_embedder}", 0)
    with _embedders_lock:
        if key not in _embedders:
            _embedders[key] = build_name_embedder(settings)
        return _embedders[key]


def warm_at_start(*, passages: bool, names: bool) -> None:
    """Which embedders `load_embedder_at_start` loads in this worker's pool processes: the
    passages' (the `celery` queue embeds), the names' (the `extract` queue extracts)."""
    global _warm
    _warm = (passages, names)


# (passages, names): what this worker's processes load as they start
_warm: tuple[bool, bool] = (True, True)


def load_embedder_at_start(**_: object) -> None:
    """In a pool process as it starts (Celery's `worker_process_init`, before the process is
    handed any task): build the embedders this worker uses and embed once, which loads the
    model. A failure (an embedding server down) is logged and the process starts anyway: the
    first task builds it again, under the tasks' own retries."""
    settings = load_settings()
    passages, names = _warm
    wanted = ([("embedder", settings.embedder, _embedder)] if passages else []) + (
        [("name embedder", settings.entity_name_embedder, _name_embedder)] if names else [])
    for what, name, build in wanted:
        started = time.monotonic()
        try:
            build(settings).embed(["warm-up"])
        except Exception as exc:
            log.warning("%s %s not loaded at start (the first task loads it): %s", what, name,
                        exc)
            continue
        log.info("%s %s loaded at start in %.1f s (pid %d), before any task", what, name,
                 time.monotonic() - started, os.getpid())
