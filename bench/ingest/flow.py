"""The two ends of the ingestion benchmark's pipeline: a publisher that notes when each document
went in, a watcher of the changes topic that notes when each came out indexed, and the split of
the time in between into stages from Postgres's timestamps.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Sequence

import psycopg
from kafka import KafkaConsumer, TopicPartition

from bench.harness.processes import PipelineProcesses
from bench.ingest.corpus import SOURCE, Doc, object_id, put_envelope
from pipeline.kafka.io import make_producer
from pipeline.kafka.publisher import EventPublisher
from pipeline.settings import Settings

INDEXED = "brainstream.object.indexed"
# A phase ends when every document is indexed or nothing was indexed for this long; documents
# still missing then count as lost (the slowest normal gap, a MiniLM model load, is ~10 s).
IDLE_TIMEOUT = 60.0


class ChangeWatcher:
    """Reads the changes topic from the beginning in a thread and notes when each object of the
    watched namespaces was first announced as indexed (wall clock, as Postgres's now()).

    End offsets are unreliable on the embedded broker, so nothing here depends on them: the
    watcher reads everything and filters by namespace.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._seen: dict[str, dict[str, float]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="change-watcher", daemon=True)

    def watch(self, namespace: uuid.UUID) -> None:
        """Start recording the indexed objects of `namespace`."""
        with self._lock:
            self._seen.setdefault(str(namespace), {})

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(timeout=60):
            raise RuntimeError(f"change watcher did not start: {self._error!r}")

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # started: a failure before start() is not masked
            self._thread.join(timeout=10)

    def _run(self) -> None:
        try:
            consumer = KafkaConsumer(bootstrap_servers=self.settings.effective_kafka_bootstrap,
                                     group_id=None, enable_auto_commit=False,
                                     fetch_max_wait_ms=50, client_id="bench-watcher")
        except Exception as exc:  # reported by start(), which waits for readiness
            self._error = exc
            return
        try:
            topic = self.settings.topic_changes
            partitions = consumer.partitions_for_topic(topic) or set()
            assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
            consumer.assign(assigned)
            consumer.seek_to_beginning(*assigned)
            self._ready.set()
            while not self._stop.is_set():
                batches = consumer.poll(timeout_ms=100)
                now = time.time()
                for records in batches.values():
                    for record in records:
                        self._note(record.value, now)
        except BaseException as exc:
            self._error = exc
            raise
        finally:
            consumer.close()

    def _note(self, value: bytes, at: float) -> None:
        try:
            event = json.loads(value)
        except ValueError:
            return
        if event.get("type") != INDEXED:
            return
        with self._lock:
            seen = self._seen.get(str(event.get("namespace")))
            if seen is not None:
                seen.setdefault(str(event["data"]["id"]), at)

    def indexed(self, namespace: uuid.UUID) -> dict[str, float]:
        """A copy of object id -> first indexed time, for `namespace`."""
        with self._lock:
            return dict(self._seen.get(str(namespace), {}))

    def wait_indexed(self, namespace: uuid.UUID, ids: Sequence[str], *, idle_timeout: float,
                     processes: PipelineProcesses) -> dict[str, float]:
        """Wait until every id is indexed, or until nothing progressed for `idle_timeout`
        seconds; return id -> indexed time of those that were (a lost one never will be)."""
        wanted = set(ids)
        last_count = -1
        last_progress = time.monotonic()
        while True:
            if self._error is not None:
                raise RuntimeError(f"change watcher failed: {self._error!r}")
            processes.check_alive()
            seen = self.indexed(namespace)
            done = {i: seen[i] for i in wanted.intersection(seen)}
            if len(done) == len(wanted):
                return done
            if len(done) != last_count:
                last_count, last_progress = len(done), time.monotonic()
            elif time.monotonic() - last_progress > idle_timeout:
                return done
            time.sleep(0.05)


class TimedPublisher:
    """The project's producer and publisher, noting when (wall clock) each document was handed
    to it."""

    def __init__(self, settings: Settings) -> None:
        self.producer = make_producer(settings)
        self.publisher = EventPublisher(self.producer, settings.topic_events)
        self.acked: dict[str, float] = {}  # id -> when the broker acknowledged it (steady)

    def burst(self, namespace: uuid.UUID, docs: Sequence[tuple[str, Doc]]
              ) -> dict[str, float]:
        """Publish every document as fast as possible; id -> publish time."""
        sent: dict[str, float] = {}
        for key, doc in docs:
            sent[str(object_id(namespace, key))] = time.time()
            self.publisher.send_event(put_envelope(namespace, key, doc))
        self.publisher.flush()
        return sent

    def steady(self, namespace: uuid.UUID, docs: Sequence[tuple[str, Doc]], rate: float
               ) -> dict[str, float]:
        """Publish the documents at `rate` per second on a fixed schedule; id -> publish time."""
        sent: dict[str, float] = {}
        start = time.monotonic()
        for number, (key, doc) in enumerate(docs):
            delay = start + number / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            oid = str(object_id(namespace, key))
            sent[oid] = time.time()
            self.publisher.send_event(put_envelope(namespace, key, doc))
            self.publisher.pending[-1].add_callback(self._ack, oid)
        self.publisher.flush()
        return sent

    def _ack(self, oid: str, _metadata: object) -> None:
        self.acked[oid] = time.time()  # in the producer's I/O thread

    def close(self) -> None:
        self.producer.close()


_STAGES = """
SELECT o.id::text, extract(epoch FROM pe.processed_at), extract(epoch FROM last.created_at),
       extract(epoch FROM last.done_at)
FROM objects o
JOIN processed_events pe
  ON pe.namespace_id = o.namespace_id AND pe.source = %(source)s AND pe.event_id = o.event_id
JOIN (SELECT DISTINCT ON (aggregate_id) aggregate_id, created_at, done_at FROM outbox
      WHERE namespace_id = %(ns)s AND op = 'node_sync'
      ORDER BY aggregate_id, id DESC) last
  ON last.aggregate_id = o.id
WHERE o.namespace_id = %(ns)s AND o.parent_id IS NULL
"""

STAGES = ("publish -> broker acknowledged", "-> consumer batch starts", "-> embedding stored",
          "-> graph written", "-> change event received")


def stage_breakdown(settings: Settings, namespace: uuid.UUID, sent: dict[str, float],
                    indexed: dict[str, float], acked: dict[str, float]
                    ) -> dict[str, list[float]]:
    """Seconds each indexed document spent in each stage, from Postgres's timestamps.

    The broker's acknowledgement of the publish (`acked`, the producer's callback), the
    consumer's batch transaction start (`processed_events.processed_at`), the start of the
    embedding transaction that completed the document (its last `node_sync` outbox row's
    `created_at`), and the relay's `done_at` on that row split the publish-to-indexed time into
    five stages. Only `node_sync` rows: a root's other rows (a link's `edge_sync` names its
    source) would measure something else.
    """
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        rows = conn.execute(_STAGES, {"ns": namespace, "source": SOURCE}).fetchall()
    out: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for oid, consumed, embedded, relayed in rows:
        if oid not in indexed or oid not in acked or relayed is None:
            continue
        marks = [sent[oid], acked[oid], float(consumed), float(embedded), float(relayed),
                 indexed[oid]]
        for stage, start, end in zip(STAGES, marks, marks[1:], strict=False):
            out[stage].append(end - start)
    return out
