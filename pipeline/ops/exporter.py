"""Prometheus export of the pipeline processes (consumer, embedding worker, relay).

Counters and histograms (`pipeline.metrics.instruments`) are updated where the work happens;
gauges that describe shared state (lag, outbox backlog and age, embedding backlog) are computed
when Prometheus scrapes, by a collector that asks Postgres and the broker, so every process
reports the same truth.
Celery runs tasks in forked pool processes: the worker exports through prometheus_client's
multiprocess mode (`PROMETHEUS_MULTIPROC_DIR`, set by `brainstream worker` before forking).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from pipeline.settings import Settings

if TYPE_CHECKING:
    from pipeline.ops.memory import MemoryBacklog

log = logging.getLogger(__name__)


class StateCollector(Collector):
    """Gauges read at scrape time: outbox backlog and age, embedding and extraction backlogs,
    consumer lag."""

    def __init__(self, settings: Settings, *, lag: bool) -> None:
        self.settings = settings
        self.lag = lag

    def collect(self) -> Iterator[GaugeMetricFamily]:
        import psycopg

        from pipeline.ops.status import Backlogs, read_backlogs

        settings = self._active()

        backlog = GaugeMetricFamily("brainstream_outbox_backlog", "Outbox rows not applied yet",
                                    labels=["op"])
        age = GaugeMetricFamily("brainstream_outbox_oldest_seconds",
                                "Age of the oldest pending outbox row", labels=["op"])
        failed = GaugeMetricFamily("brainstream_outbox_failed",
                                   "Outbox rows the graph kept refusing (dead-lettered)",
                                   labels=["op"])
        embed = GaugeMetricFamily("brainstream_embedding_rows", "Rows by embedding status",
                                  labels=["status"])
        extract = GaugeMetricFamily("brainstream_extraction_rows",
                                    "Rows by entity extraction status (recount: waiting for a "
                                    "recount after a delete or revival)", labels=["status"])
        backlogs: Backlogs | None = None
        try:
            with psycopg.connect(settings.effective_postgres_dsn, connect_timeout=3) as c:
                backlogs = read_backlogs(c, settings.memory_window)
            for op in backlogs.outbox:
                backlog.add_metric([op.op], float(op.count))
                age.add_metric([op.op], op.oldest_seconds)
                failed.add_metric([op.op], float(op.failed))
            for status, count in backlogs.embedding.items():
                embed.add_metric([status], float(count))
            for status, count in backlogs.extraction.items():
                extract.add_metric([status], float(count))
        except Exception as exc:  # a scrape must not fail because Postgres blinked
            log.warning("metrics: cannot read Postgres: %s", exc)
        yield backlog
        yield age
        yield failed
        yield embed
        yield extract
        yield from self._memory(backlogs.memory if backlogs is not None else None)
        if self.lag:
            yield from self._lag(settings)

    def _memory(self, memory: MemoryBacklog | None) -> Iterator[GaugeMetricFamily]:
        """Conversation memory: each extractor's backlog and lag, and the summary lag (no
        samples when Postgres could not be read)."""
        pending = GaugeMetricFamily("brainstream_memory_extractor_pending",
                                    "Messages an extractor has not done yet",
                                    labels=["extractor"])
        failed = GaugeMetricFamily("brainstream_memory_extractor_failed",
                                   "Messages an extractor gave up on (dead-lettered)",
                                   labels=["extractor"])
        lag = GaugeMetricFamily("brainstream_memory_extractor_lag_seconds",
                                "Age of the oldest message an extractor has not done",
                                labels=["extractor"])
        summary = GaugeMetricFamily("brainstream_memory_summary_lag_messages",
                                    "Messages past the window not folded into a summary yet "
                                    "(all sessions, and the worst one)", labels=["scope"])
        summariser = GaugeMetricFamily("brainstream_memory_summariser_pending",
                                       "Sessions waiting for the summariser")
        if memory is not None:
            for e in memory.extractors:
                pending.add_metric([e.extractor], float(e.pending))
                failed.add_metric([e.extractor], float(e.failed))
                lag.add_metric([e.extractor], e.oldest_pending_seconds)
            summary.add_metric(["total"], float(memory.summary_lag_messages))
            summary.add_metric(["max"], float(memory.summary_lag_max))
            summariser.add_metric([], float(memory.summariser_pending))
        yield from (pending, failed, lag, summary, summariser)

    def _active(self) -> Settings:
        """The active index generation's settings (a replay may have switched since start)."""
        from pipeline.generations.active import resolve

        try:
            return resolve(self.settings)
        except Exception as exc:  # a scrape must not fail because Postgres blinked
            log.warning("metrics: cannot read the active generation: %s", exc)
            return self.settings

    def _lag(self, settings: Settings) -> Iterator[GaugeMetricFamily]:
        from pipeline.kafka.offsets import committed_offsets, read_tails

        gauge = GaugeMetricFamily("brainstream_consumer_lag", "Records not yet consumed",
                                  labels=["partition"])
        try:
            topic = settings.topic_events
            committed = committed_offsets(settings, topic, settings.consumer_group)
            for tail in read_tails(settings, topic, committed, max_seconds=2.0):
                gauge.add_metric([str(tail.partition)], float(tail.count))
        except Exception as exc:
            log.warning("metrics: cannot compute lag: %s", exc)
        yield gauge


def serve(settings: Settings, port: int, *, lag: bool) -> None:
    """Expose /metrics on `port` (127.0.0.1 unless API_HOST says otherwise)."""
    registry = CollectorRegistry()
    multiproc = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if multiproc:
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        from prometheus_client import REGISTRY

        registry = REGISTRY
    registry.register(StateCollector(settings, lag=lag))
    try:
        start_http_server(port, addr=settings.api_host, registry=registry)
    except OSError as exc:
        log.error("metrics: cannot listen on port %d: %s", port, exc)
