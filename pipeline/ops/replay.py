"""`brainstream replay`: rebuild the index into a fresh generation from the input topic.

The replay runs in one process and uses the write path's own code: `BatchProcessor` (hence
`apply_batch`, one transaction per batch, the exactly-once ledger) into the new generation's
database, `EmbeddingService` with the generation's embedder, and `OutboxRelay` into the
generation's graph. The workers keep serving the active generation meanwhile, so the replay
embeds, extracts (entities, and the message extractors and summaries of conversation memory)
and relays itself.

Order of events (see docs/operations.md, "Replay"):

1. create the generation (database, migrations, kind catalog and recipes copied, graph);
2. publish a marker record to every partition of the input topic;
3. consume every partition from the beginning (or `--since`) with the generation's consumer
   group, by assignment (no group membership, so no rebalance waits);
4. caught up = past its own marker on every partition, at or past the live consumer group's
   committed offsets, no embedding, extraction, memory or outbox backlog
   (`pipeline.kafka.markers.catch_up`);
5. switch the active generation (one UPDATE, atomic), keep consuming until the topic is idle,
   then commit the group's offsets and record the hand-off: only then does the live consumer
   join the new group, so every event acknowledged to the old group is in the new generation,
   and nothing published since is skipped.

During a replay, rejected events are counted, not dead-lettered again (they were when first
consumed), and change events are not re-published (subscribers saw them the first time).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, TextIO

from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from pipeline.domain.errors import ConfigError, InvalidInput
from pipeline.domain.projection import Change
from pipeline.embedding.service import pending_count
from pipeline.embedding.settings import KNOWN_EMBEDDING_DIMS
from pipeline.generations.active import Generation, active_generation
from pipeline.ingest.processor import BatchProcessor
from pipeline.ingest.settings import BULK_BATCH_SIZE
from pipeline.ingest.store.events import PgEventStores
from pipeline.kafka.io import H_CODE, make_producer
from pipeline.kafka.markers import catch_up, marker_record
from pipeline.kafka.offsets import committed_offsets
from pipeline.ops.generations import (
    activate,
    create_generation,
    mark_failed,
    mark_handoff,
    record_marker,
)
from pipeline.ops.progress import Progress
from pipeline.ops.replay_step import InProcessWork, ReplayReport, ReplayStep
from pipeline.outbox.store import backlog
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings

log = logging.getLogger(__name__)
Report = Callable[[str], None]


def _noop(_: str) -> None:
    pass


class _CountedLetters:
    """The replay's dead-letter sink: counts by code instead of re-publishing (each of these
    events was dead-lettered when it was first consumed)."""

    def __init__(self, report: ReplayReport) -> None:
        self.report = report

    def send(self, letters: Sequence[tuple[bytes | None, bytes, list[tuple[str, bytes]]]],
             timeout: float = 30.0) -> None:
        for _, _, headers in letters:
            code = dict(headers).get(H_CODE, b"internal").decode("utf-8", "replace")
            self.report.rejected[code] += 1


class _NoTrigger:
    """The replay embeds, extracts, runs the memory work and relays in-process: nothing to tell
    the workers."""

    def embed(self, roots: Sequence[Any]) -> None:
        pass

    def extract(self, roots: Sequence[Any]) -> None:
        pass

    def relay(self) -> None:
        pass

    def memory(self, sessions: Sequence[Any]) -> None:
        pass


class _SuppressedChanges:
    """Change events are not re-published during a replay: subscribers saw them the first
    time; a replay would only repeat them (with new ids)."""

    def __init__(self, report: ReplayReport) -> None:
        self.report = report

    def publish(self, changes: Sequence[Change]) -> None:
        self.report.changes_suppressed += len(changes)


def embedder_dimension(settings: Settings, embedder: str) -> int:
    """The vector dimension of `embedder` (an `http` embedder's comes from EMBEDDING_DIM)."""
    if embedder == settings.embedder:
        return settings.vector_dim
    if embedder in KNOWN_EMBEDDING_DIMS:
        return KNOWN_EMBEDDING_DIMS[embedder]
    if embedder == "http" and settings.embedding_dim is not None:
        return settings.embedding_dim
    raise ConfigError(f"unknown embedder {embedder!r} (or BRAINSTREAM_EMBEDDING_DIM unset for "
                      "http)", field="embedder")


class Replay:
    """One replay into one new generation (`run()` does it all)."""

    def __init__(self, base: Settings, *, since: datetime | None = None,
                 embedder: str | None = None, switch: bool = True, batch: int | None = None,
                 idle_seconds: float = 1.0, stream: TextIO | None = None,
                 report: Report = _noop) -> None:
        self.base = base
        self.since = since
        self.embedder = embedder or base.embedder
        self.switch = switch
        self.batch = batch or BULK_BATCH_SIZE  # always behind until its markers
        self.idle_seconds = idle_seconds
        self.stream = stream
        self.say = report
        self.topic = base.topic_events
        self.positions: dict[int, int] = {}
        self.markers_seen: dict[int, int] = {}
        self.marked_at: float | None = None
        self.since_ms = None if since is None else int(since.timestamp() * 1000)

    def run(self) -> ReplayReport:
        """Build the generation, catch up, switch (unless told not to), hand off."""
        started = time.monotonic()
        dim = embedder_dimension(self.base, self.embedder)
        live = active_generation(self.base)
        gen = create_generation(self.base, embedder=self.embedder, embedding_dim=dim,
                                since=self.since, report=self.say)
        result = ReplayReport(generation=gen.id)
        try:
            self._run(gen, live, result)
        except BaseException as exc:
            mark_failed(self.base, gen.id, f"{type(exc).__name__}: {exc}")
            self.say(f"replay into generation {gen.id} failed: {exc}; generation "
                     f"{live.id} stays active (drop {gen.id} with `brainstream generations "
                     f"drop {gen.id}`)")
            raise
        result.seconds = time.monotonic() - started
        return result

    # -- the phases --------------------------------------------------------------------------

    def _run(self, gen: Generation, live: Generation, result: ReplayReport) -> None:
        settings = gen.settings(self.base)
        consumer = KafkaConsumer(
            bootstrap_servers=settings.effective_kafka_bootstrap,
            group_id=gen.consumer_group, enable_auto_commit=False,
            client_id=f"brainstream-replay-g{gen.id}", fetch_max_wait_ms=100,
            max_partition_fetch_bytes=max(4 * settings.max_event_bytes, 1_048_576),
            fetch_max_bytes=max(8 * settings.max_event_bytes, 52_428_800),
            request_timeout_ms=30_000)
        # the consumer's batches and the stages' threads (replay_step.CONCURRENT), each of which
        # may hold two connections at once (a claim's and a write-back's)
        pool = make_pool(settings, max_size=10, name=f"brainstream-replay-g{gen.id}")
        # the live generation's stored vectors: a text the same model embedded there is not
        # embedded again (pipeline/embedding/reuse.py)
        source = make_pool(live.settings(self.base), min_size=0, max_size=1,
                           name=f"brainstream-replay-g{gen.id}-source")
        try:
            partitions = sorted(consumer.partitions_for_topic(self.topic) or [])
            if not partitions:
                raise InvalidInput(f"topic {self.topic} does not exist: run `brainstream "
                                   "migrate`", field="topic_events")
            marks = self._publish_markers(gen, partitions)
            starts = self._assign(consumer, partitions)
            total = sum(max(0, marks[p] + 1 - starts[p]) for p in partitions)
            self.say(f"replaying {self.topic} ({len(partitions)} partitions, about {total:,} "
                     f"records up to the markers) into generation {gen.id}")
            processor = BatchProcessor(settings, PgEventStores(pool), _CountedLetters(result),
                                       _NoTrigger())
            # A link waiting for an endpoint on another partition waits without a time limit
            # here: partitions are read one after the other, so minutes of topic may pass
            # before the endpoint's partition is read. What still waits at the end is decided
            # by `_expire_deferred`.
            processor.options = replace(processor.options, defer_seconds=float("inf"))
            work = InProcessWork.for_generation(settings, pool, _SuppressedChanges(result),
                                                vector_source=source)
            step = ReplayStep(consumer, processor, work, self, result, gen.id)
            progress = Progress(f"replay g{gen.id} (records)", total or None,
                                stream=self.stream)
            while True:
                got = step.consume(self.batch)
                progress.update(result.records + result.skipped)
                step.work(final=False)
                if got and len(self.markers_seen) < len(partitions):
                    continue
                if len(self.markers_seen) == len(partitions) and (not got or got < self.batch):
                    step.settle()
                    state = catch_up(
                        partitions, self.markers_seen, self.positions,
                        committed_offsets(self.base, self.topic, live.consumer_group),
                        embed_pending=pending_count(pool),
                        outbox_pending=backlog(pool) + work.lexical_pending(),
                        extract_pending=work.extract_pending(),
                        memory_pending=work.memory_pending())
                    if state.ready:
                        break
                    log.info("replay: not yet: %s", state.reason)
            progress.finish()
            if self.switch:
                # readers switch now; the live consumer waits for the hand-off below
                activate(self.base, gen.id, caught_up=True)
                result.switched = True
                self.say(f"generation {gen.id} is active (was {live.id})")
            # Keep consuming what arrived meanwhile until the topic is idle (bounded: under
            # steady traffic it never is), then commit: the live consumer joins the new group
            # only after this hand-off and continues from there, so the bound loses nothing.
            idle_since = time.monotonic()
            drain_until = idle_since + max(10.0, 5 * self.idle_seconds)
            while time.monotonic() - idle_since < self.idle_seconds \
                    and time.monotonic() < drain_until:
                if step.consume(self.batch):
                    idle_since = time.monotonic()
                step.work(final=False)
            step.settle()
            self._expire_deferred(pool, settings, marks, result)
            consumer.commit({TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1)
                             for p, o in self.positions.items()})
            mark_handoff(self.base, gen.id)
            self.say(f"committed the offsets of consumer group {gen.consumer_group}: "
                     + ", ".join(f"{p}:{o}" for p, o in sorted(self.positions.items())))
        finally:
            consumer.close()
            pool.close()
            source.close()

    def _expire_deferred(self, pool: Any, settings: Settings, marks: dict[int, int],
                         result: ReplayReport) -> None:
        """Events still waiting for an endpoint at the hand-off: one from before the marker
        whose wait would have ended by now (marker time + DEFER_SECONDS) was dead-lettered when
        first consumed, so it is counted and dropped, not dead-lettered again; any other keeps
        waiting in the new generation, from the marker's time, for the live pipeline."""
        expired_before = self.marked_at is not None and \
            time.time() - self.marked_at > settings.defer_seconds
        with pool.connection() as conn, conn.transaction():
            rows = conn.execute("SELECT id, partition, \"offset\", reason_code"
                                " FROM deferred_events WHERE topic = %s FOR UPDATE",
                                (self.topic,)).fetchall()
            gone = [(r[0], r[3]) for r in rows if r[2] < marks.get(r[1], -1) and expired_before]
            kept = [r[0] for r in rows if r[2] < marks.get(r[1], -1) and not expired_before]
            conn.execute("DELETE FROM deferred_events WHERE id = ANY(%s)",
                         ([g[0] for g in gone],))
            conn.execute("UPDATE deferred_events SET first_seen = to_timestamp(%s)"
                         " WHERE id = ANY(%s)", (self.marked_at, kept))
        for _, code in gone:
            result.rejected[code] += 1

    def _publish_markers(self, gen: Generation, partitions: Sequence[int]) -> dict[int, int]:
        self.marked_at = time.time()
        producer = make_producer(self.base)
        try:
            futures = {}
            for partition in partitions:
                key, value, headers = marker_record(gen.id, partition)
                futures[partition] = producer.send(self.topic, key=key, value=value,
                                                   headers=headers, partition=partition)
            producer.flush(timeout=30)
            offsets = {p: int(f.get(timeout=30).offset) for p, f in futures.items()}
        finally:
            producer.close()
        record_marker(self.base, gen.id, {"generation": gen.id, "topic": self.topic,
                                          "offsets": {str(p): o for p, o in offsets.items()}})
        return offsets

    def _assign(self, consumer: KafkaConsumer, partitions: Sequence[int]) -> dict[int, int]:
        tps = [TopicPartition(self.topic, p) for p in partitions]
        consumer.assign(tps)
        # From the beginning even with --since: the embedded broker answers offset-for-time
        # lookups wrongly (offsets past the time, timestamps rounded to the second), so records
        # older than `since` are read and skipped by their own timestamp instead.
        consumer.seek_to_beginning(*tps)
        beginnings = consumer.beginning_offsets(tps)
        starts = {tp.partition: int(beginnings[tp]) for tp in tps}
        self.positions = dict(starts)
        return starts
