"""The faust-streaming consumer: input topic -> Postgres, in batches, at-least-once with
idempotent effects.

Why the loop is shaped like this (measured on the embedded broker, see docs/architecture.md):
`take_events` acknowledges a batch only when the loop asks for the next one, and faust commits
only unbroken runs of acknowledged offsets, so a killed consumer loses nothing. But an exception
that leaves the loop makes faust acknowledge the failed batch and everything buffered: data loss.
So the body never raises: `BatchProcessor.process` retries until the batch is durable (or each
bad event is dead-lettered), and if even that is impossible the process ends with `os._exit(1)`
before anything is acknowledged.

Index generations: the consumer writes the active generation's database under that generation's
consumer group. A timer re-reads the generation pointer every second; once a replay switched
generations *and* committed the new group's offsets (the hand-off), the consumer waits for its
batch in flight to be durable and re-executes itself, joining the new group where the replay
stopped. Events applied twice around the hand-off are no-ops (the processed-event ledger).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import faust

from consumers.transport import App
from pipeline.generations.active import ActivePointer, Generation
from pipeline.ingest.processor import BatchProcessor
from pipeline.ingest.records import RawRecord
from pipeline.ingest.settings import (
    BULK_BATCH_SIZE,
    CONSUMER_BATCH_SECONDS,
    CONSUMER_BATCH_SIZE,
    CONSUMER_FETCH_WAIT_MS,
)
from pipeline.ingest.store.events import PgEventStores
from pipeline.kafka.io import DeadLetterWriter, make_producer
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings, load_settings

log = logging.getLogger("brainstream.consumer")


def _broker_urls(settings: Settings) -> list[str]:
    return [f"kafka://{host.strip()}" for host in settings.effective_kafka_bootstrap.split(",")]


def create_app(settings: Settings, pointer: ActivePointer | None = None) -> faust.App:
    """The faust app of `settings`' generation; with a `pointer`, it follows switches."""
    datadir = settings.resolved_data_dir / "faust"
    datadir.mkdir(parents=True, exist_ok=True)
    app = App(
        settings.consumer_group,  # the group id: one per index generation
        broker=_broker_urls(settings),
        datadir=str(datadir),
        web_enabled=False,
        topic_allow_declare=False,  # `brainstream migrate` creates topics with their partitions
        topic_partitions=settings.topic_partitions,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=6,  # group joins take about half of it on the embedded broker
        broker_heartbeat_interval=2,
        broker_commit_every=CONSUMER_BATCH_SIZE,
        consumer_max_fetch_size=max(4 * settings.max_event_bytes, 4 * 1024 * 1024),
        producer_max_request_size=max(2 * settings.max_event_bytes, 1_048_576),
        # a batch's worth waits while the one before is applied (faust stops filling the take
        # buffer meanwhile), so a consumer behind takes a full batch at once
        stream_buffer_maxsize=BULK_BATCH_SIZE,
        fetch_wait_ms=CONSUMER_FETCH_WAIT_MS,
    )
    topic = app.topic(settings.topic_events, key_type=bytes, value_type=bytes,
                      key_serializer="raw", value_serializer="raw")
    processor = _LazyProcessor(settings)

    @app.agent(topic, name="brainstream.ingest")
    async def ingest(stream: Any) -> None:  # faust's StreamT stubs lack take_events
        # What is waiting, up to BULK_BATCH_SIZE: a few records when caught up (the latency of
        # CONSUMER_BATCH_SECONDS), large batches while behind.
        async for events in stream.take_events(BULK_BATCH_SIZE,
                                                within=CONSUMER_BATCH_SECONDS):
            records = [_record(event) for event in events]
            try:
                outcome = await asyncio.to_thread(processor.process, records)
            except BaseException:
                log.exception("batch of %d records could not be made durable; exiting without "
                              "acknowledging it", len(records))
                os._exit(1)
            log.info("batch: %d records, %d applied, %d duplicates, %d stale, %d deferred, "
                     "%d dead-lettered", len(records), outcome.applied, outcome.duplicates,
                     outcome.stale, outcome.deferred, len(outcome.dead))
            for letter in outcome.dead:  # the topic has the full letter; the log says why
                log.warning("dead-lettered %s", letter.describe())

    if pointer is not None:

        @app.timer(interval=1.0)  # type: ignore[untyped-decorator]
        async def follow_generation() -> None:
            gen = await asyncio.to_thread(pointer.current)
            if gen.id == settings.generation or not handed_off(gen):
                return
            log.info("generation %d is active and handed off: finishing the batch in flight, "
                     "then joining consumer group %s", gen.id, gen.consumer_group)
            # Holding the lock means no batch is in flight: all we applied is durable.
            await asyncio.to_thread(processor.hold)
            reexec()

    return app


def handed_off(gen: Generation) -> bool:
    """Whether a live consumer may join the generation's group (the replay committed its
    offsets; generation 1 never had a replay)."""
    return gen.implicit or gen.handoff_at is not None


def reexec() -> None:
    """Replace this process with a fresh consumer (same pid, same command line)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


def _record(event: Any) -> RawRecord:
    message = event.message
    headers: Sequence[tuple[str, bytes]] = message.headers or ()
    value = message.value if isinstance(message.value, bytes) else bytes(message.value or b"")
    stamp = getattr(message, "timestamp", None)  # seconds (float) in faust
    return RawRecord(topic=message.topic, partition=message.partition, offset=message.offset,
                     key=message.key, value=value,
                     headers=tuple((str(k), bytes(v or b"")) for k, v in headers),
                     timestamp_ms=int(stamp * 1000) if stamp and stamp > 0 else None)


class _LazyProcessor:
    """Builds the pool, producer and trigger on first use, in the worker thread."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._processor: BatchProcessor | None = None
        self._lock = threading.Lock()

    def hold(self) -> None:
        """Wait for the batch in flight and keep every later one out (before a re-exec)."""
        self._lock.acquire()

    def process(self, records: Sequence[RawRecord]) -> Any:
        with self._lock:
            if self._processor is None:
                from workers.app import app as celery_app
                from workers.triggers import CeleryTrigger

                producer = make_producer(self.settings)
                self._processor = BatchProcessor(
                    self.settings,
                    PgEventStores(make_pool(self.settings, min_size=1, max_size=2,
                                            name="brainstream-consumer")),
                    DeadLetterWriter.of(producer, self.settings),
                    CeleryTrigger(celery_app),
                )
            return self._processor.process(records)


def _startup_generation(pointer: ActivePointer) -> Generation:
    """The generation to consume into: the active one, once its replay handed off (a replay that
    just switched is still committing the group's offsets); waits while Postgres is down."""
    import psycopg

    while True:
        try:
            gen = pointer.current()
        except psycopg.OperationalError as exc:
            log.warning("cannot read the active index generation (%s); retrying", exc)
            time.sleep(1.0)
            continue
        if handed_off(gen):
            return gen
        log.warning("generation %d is active but its replay has not handed off yet; waiting",
                    gen.id)
        time.sleep(1.0)


def _wait_for_broker(settings: Settings, *, max_wait: float = 30.0) -> None:
    """Block, backing off, until a bootstrap server accepts a connection: faust exits at once
    when it cannot reach the broker at start, and `brainstream up` would stop every process
    with it; a consumer started while the broker restarts should wait for it instead."""
    import socket

    delay = 0.5
    while True:
        for server in settings.effective_kafka_bootstrap.split(","):
            host, _, port = server.strip().rpartition(":")
            try:
                socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)),
                                         timeout=2.0).close()
                return
            except (OSError, ValueError):
                continue
        log.warning("broker %s unreachable; retrying in %.1fs",
                    settings.effective_kafka_bootstrap, delay)
        time.sleep(delay)
        delay = min(delay * 2, max_wait)


def main() -> None:
    """Run the consumer worker in the foreground (faust's own CLI, without its web server)."""
    import sys

    base = load_settings()
    pointer = ActivePointer(base, ttl=1.0)
    gen = _startup_generation(pointer)
    _wait_for_broker(base)
    settings = gen.settings(base)
    log.info("consuming into index generation %d (consumer group %s)", gen.id,
             settings.consumer_group)
    if settings.consumer_metrics_port:
        from pipeline.ops.exporter import serve

        serve(settings, settings.consumer_metrics_port, lag=True)
    app = create_app(settings, pointer)
    sys.argv = ["brainstream-consumer", "worker", "--without-web", "--loglevel", "info"]
    app.main()
