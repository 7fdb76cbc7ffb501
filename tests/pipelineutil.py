"""Running the pipeline's processes in tests, and observing their effects on the real services."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from kafka import KafkaConsumer, KafkaProducer

from pipeline.embedding.embedders.static import StaticEmbedder
from pipeline.embedding.service import EmbeddingService
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import RawRecord, ingest_options
from pipeline.ingest.store.events import PgEventStore
from pipeline.kafka.io import KafkaChangeSink, make_producer
from pipeline.lexical.replica import read_state
from pipeline.lexical.writer import LexicalWriter
from pipeline.outbox.relay import OutboxRelay
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.stackutil import settings_env

T = TypeVar("T")

PROCESS_ARGS: dict[str, list[str]] = {
    "consumer": ["consumer"],
    # a second consumer of the same group (tests/faults/test_scale_out.py)
    "consumer2": ["consumer"],
    "worker": ["worker", "--queues", "celery", "--concurrency", "2", "--beat"],
    "extract": ["worker", "--queues", "extract", "--concurrency", "1", "--no-beat",
                "--metrics-port", "0"],
    "relay": ["worker", "--queues", "relay", "--concurrency", "2", "--no-beat",
              "--metrics-port", "0"],
}


# Publisher keys of every pipeline the tests start (tests/hostile/test_publisher_keys.py and the
# replay's corpus): a process reads its settings once, at start, so the keys are there from the
# session's first consumer on. Each binds namespaces no other test writes to.
KEYED_NS = str(uuid.uuid4())  # tenant A: only events signed with "tests-a"
OTHER_KEYED_NS = str(uuid.uuid4())  # tenant B's protected namespace ("tests-b")
# Conversation memory (tests/memory): a namespace whose publishers hold a privileged key (may
# write the `system` metadata key of messages) and a plain one.
MEMORY_KEYED_NS = str(uuid.uuid4())
PUBLISHER_SECRETS = {key_id: f"{key_id}-{uuid.uuid4().hex}"
                     for key_id in ("tests-a", "tests-b", "tests-mem-priv", "tests-mem")}
PUBLISHER_KEYS = {
    "tests-a": {"secret": PUBLISHER_SECRETS["tests-a"], "namespaces": [KEYED_NS]},
    "tests-b": {"secret": PUBLISHER_SECRETS["tests-b"], "namespaces": [OTHER_KEYED_NS]},
    "tests-mem-priv": {"secret": PUBLISHER_SECRETS["tests-mem-priv"],
                       "namespaces": [MEMORY_KEYED_NS], "privileged": True},
    "tests-mem": {"secret": PUBLISHER_SECRETS["tests-mem"], "namespaces": [MEMORY_KEYED_NS]},
}


def metrics_ports(settings: Settings) -> tuple[int, int]:
    """Metrics ports of the test processes (next to the stack's ports, offset with them)."""
    return settings.pg_port - 4300, settings.pg_port - 4299


def pipeline_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = settings_env(settings)
    env.update({
        "BRAINSTREAM_SWEEP_INTERVAL": "1",
        "BRAINSTREAM_EMBED_LEASE_SECONDS": "5",
        "BRAINSTREAM_RELAY_MAX_ATTEMPTS": "3",
        "BRAINSTREAM_DEFER_SECONDS": "4",
        "BRAINSTREAM_CONSUMER_METRICS_PORT": str(metrics_ports(settings)[0]),
        "BRAINSTREAM_WORKER_METRICS_PORT": str(metrics_ports(settings)[1]),
        "BRAINSTREAM_PUBLISHER_KEYS": json.dumps(PUBLISHER_KEYS),
        "PYTHONUNBUFFERED": "1",
    })
    env.update(extra)
    return env


@dataclass
class Proc:
    """One pipeline process (consumer, worker, extract, relay) run as a child of the test
    session."""

    name: str
    env: dict[str, str]
    log_dir: Path
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> Proc:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_dir / f"{self.name}.log", "ab")  # noqa: SIM115 - child owns it
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "pipeline.cli", *PROCESS_ARGS[self.name]],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        return self

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill9(self) -> None:
        """SIGKILL the whole process group (Celery's pool children too)."""
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=30)

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill9()

    def restart(self) -> None:
        self.kill9()
        self.start()


def wait_for(check: Callable[[], T | None], *, timeout: float = 60.0, interval: float = 0.25,
             what: str = "condition") -> T:
    """Poll until `check` returns something truthy; fail with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def envelope(event_type: str, namespace: uuid.UUID | str, data: dict[str, Any], *,
             event_id: str | None = None, version: int | None = None,
             source: str = "tests") -> dict[str, Any]:
    env: dict[str, Any] = {
        "specversion": "1.0", "id": event_id or str(uuid.uuid4()), "source": source,
        "type": f"brainstream.{event_type}",
        "time": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "datacontenttype": "application/json", "namespace": str(namespace), "data": data,
    }
    if version is not None:
        env["version"] = version
    return env


def put(namespace: uuid.UUID | str, **data: Any) -> dict[str, Any]:
    data.setdefault("id", str(uuid.uuid4()))
    data.setdefault("kind", "company")
    data.setdefault("title", f"object {data['id'][:8]}")
    return envelope("object.put", namespace, data)


class Publisher:
    """Sends raw values with explicit keys (tests choose keys to force one partition)."""

    def __init__(self, settings: Settings) -> None:
        self.topic = settings.topic_events
        self.producer = KafkaProducer(bootstrap_servers=settings.effective_kafka_bootstrap,
                                      acks="all", max_request_size=8 * 1024 * 1024)

    def send(self, value: bytes | dict[str, Any], key: str | bytes | None = None) -> None:
        raw = value if isinstance(value, bytes) else json.dumps(value).encode()
        k = key.encode() if isinstance(key, str) else key
        self.producer.send(self.topic, key=k, value=raw).get(timeout=30)

    def send_all(self, values: Iterable[tuple[bytes | dict[str, Any], str | bytes | None]]
                 ) -> None:
        for value, key in values:
            self.send(value, key)

    def close(self) -> None:
        self.producer.close()


def read_topic(settings: Settings, topic: str, *, timeout_ms: int = 3000
               ) -> list[tuple[bytes | None, bytes, dict[str, str]]]:
    """Every record of a topic from the beginning: (key, value, headers as text)."""
    consumer = KafkaConsumer(topic, bootstrap_servers=settings.effective_kafka_bootstrap,
                             auto_offset_reset="earliest", group_id=None,
                             consumer_timeout_ms=timeout_ms, enable_auto_commit=False)
    try:
        return [(m.key, m.value, {k: v.decode("utf-8", "replace") for k, v in m.headers or []})
                for m in consumer]
    finally:
        consumer.close()


def apply_only(settings: Settings, events: list[dict[str, Any]]) -> None:
    """The consumer's transaction over `events`, nothing after it (no embedding, extraction
    or projection: tests that run those themselves)."""
    records = [RawRecord("t", 0, i, None, json.dumps(e).encode()) for i, e in enumerate(events)]
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn, \
            conn.transaction():
        outcome = apply_batch(PgEventStore(conn), records, ingest_options(settings))
    assert not outcome.dead, [d.error.to_dict() for d in outcome.dead]


def ingest(settings: Settings, events: list[dict[str, Any]]) -> None:
    """Apply, embed and project, as the pipeline's processes would."""
    apply_only(settings, events)
    ids = [str(e["data"]["id"]) for e in events
           if isinstance(e.get("data"), dict) and e["data"].get("id")]
    pool = make_pool(settings, max_size=2)
    producer = make_producer(settings)
    try:
        embedding = EmbeddingService(settings, pool, StaticEmbedder())
        relay = OutboxRelay(settings, pool, FalkorGraphWriter.from_settings(settings),
                            KafkaChangeSink(producer, settings.topic_changes))
        lexical = LexicalWriter(settings, pool)
        # The session's pipeline processes, when running, may hold these rows' embedding lease
        # or the relay's (or lexical writer's) lock (their sweeps find the same rows): go on
        # until the rows are embedded, projected and in the lexical index, whoever does it.
        deadline = time.monotonic() + 60
        while True:
            embedding.run()
            relay.run()
            lexical.run()
            if not ids or _settled(settings, pool, ids) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    finally:
        producer.close()
        pool.close()


def _settled(settings: Settings, pool: Any, ids: list[str]) -> bool:
    """No row of these objects waits for an embedding, no outbox row of them for the graph, and
    no log row of them for this data directory's lexical replica."""
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM objects o JOIN object_embeddings e ON e.id = o.id"
            "   WHERE e.root_id::text = ANY(%(ids)s) AND e.embed_status = 'pending'"
            "   AND o.deleted_at IS NULL)"
            " + (SELECT count(*) FROM outbox WHERE done_at IS NULL"
            "   AND aggregate_id::text = ANY(%(ids)s))",
            {"ids": ids}).fetchone()
        return bool(row) and row[0] == 0 and lexical_applied(settings, conn, ids)


def lexical_applied(settings: Settings, conn: Any, ids: list[str]) -> bool:
    """Whether this data directory's lexical replica has applied every log row of these roots
    (its commit is what readers load on their next search)."""
    state = read_state(settings)
    if state is None:
        return False
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM lexical_log WHERE (xid, id) > (%s::text::xid8, %s)"
        " AND root_id::text = ANY(%s))", (str(state.cursor.xid), state.cursor.id,
                                          [str(i) for i in ids])).fetchone()
    return bool(row) and not row[0]


def catch_up_lexical(settings: Settings) -> None:
    """Catch this data directory's lexical replica up, as a read host's follower does: the test
    process is the read host of the session's processes (consumer and workers write Postgres
    and the graph; the lexical replica is each API host's own). Skipped while an API of the
    test holds the replica: its follower does the same."""
    pool = make_pool(settings, max_size=1, name="tests-read-host")
    try:  # not kept: a test may drop its database afterwards
        LexicalWriter(settings, pool).run()
    finally:
        pool.close()


def indexed(settings: Settings, object_id: str) -> bool:
    """True once the object is embedded (with its parts), in this data directory's lexical
    replica (`lexical_applied`, caught up here first: `catch_up_lexical`) and its node is in
    the graph."""
    import falkordb

    catch_up_lexical(settings)
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute(
            "SELECT bool_and(e.embed_status = 'done')"
            " FROM objects o JOIN object_embeddings e ON e.id = o.id"
            " WHERE e.root_id = %(id)s AND o.deleted_at IS NULL", {"id": object_id}).fetchone()
        if not row or not row[0] or not lexical_applied(settings, conn, [object_id]):
            return False
    graph = falkordb.FalkorDB.from_url(settings.effective_falkordb_url).select_graph(
        settings.graph_name)
    found = graph.query("MATCH (n:Entity {id: $id}) WHERE n.embedding IS NOT NULL RETURN count(n)",
                        {"id": object_id}).result_set
    return bool(found and found[0][0] == 1)
