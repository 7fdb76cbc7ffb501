"""The benchmark's harness: its own embedded stack, the real pipeline processes, the corpus, a
timed publisher and a watcher of the changes topic.

Everything here drives the pipeline from the outside, the way a deployment does: events go in
through the input topic, and a document counts as indexed when its `brainstream.object.indexed`
change event comes out of the changes topic.
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import psycopg
from kafka import KafkaConsumer, TopicPartition

from pipeline.domain.settings import EmbedderName, Settings
from pipeline.graph.falkordb.schema import prepare_graph
from pipeline.kafka.io import make_producer
from pipeline.kafka.publisher import EventPublisher
from pipeline.kafka.topics import ensure_topics
from pipeline.ops.migrations import apply_migrations
from pipeline.services.process import terminate_tree
from pipeline.services.stack import Stack
from schemas.events import wrap_bare_object

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "datasets" / "scifact" / "corpus.jsonl.gz"
BENCH_DIR = REPO / ".brainstream-bench"
SOURCE = "bench.ingest"
KIND = "doc"
INDEXED = "brainstream.object.indexed"

# Ports are the defaults moved by an offset per embedder, so both stacks (and the developer's
# and the tests' stacks) can exist side by side.
DEFAULT_PORTS = {"pg_port": 55432, "kafka_port": 19092, "s3_port": 19000,
                 "falkordb_port": 16379, "redis_port": 16380}
PORT_OFFSETS: dict[str, int] = {"static": 700, "minilm": 800}


@dataclass(frozen=True)
class Doc:
    """One SciFact abstract."""

    source_id: str
    title: str
    text: str


def load_corpus(path: Path = CORPUS) -> list[Doc]:
    """Every document of the corpus, in file order."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return [Doc(str(row["_id"]), str(row.get("title") or ""), str(row.get("text") or ""))
            for row in rows]


def cycle_docs(corpus: Sequence[Doc], count: int) -> list[tuple[str, Doc]]:
    """`count` (key, doc) pairs taken from the corpus in order, wrapping around if needed; the
    key is unique per pair so a wrapped document becomes a new object."""
    return [(f"{corpus[i % len(corpus)].source_id}#{i // len(corpus)}", corpus[i % len(corpus)])
            for i in range(count)]


def object_id(namespace: uuid.UUID, key: str) -> uuid.UUID:
    """The deterministic object id of a document in a run's namespace."""
    return uuid.uuid5(namespace, f"scifact:{key}")


def put_envelope(namespace: uuid.UUID, key: str, doc: Doc) -> dict[str, Any]:
    """The put event of one document (kind `doc`, the abstract as content)."""
    data: dict[str, Any] = {"id": str(object_id(namespace, key)), "kind": KIND,
                            "content": doc.text}
    if doc.title:
        data["title"] = doc.title
    return wrap_bare_object(data, namespace, SOURCE, event_id=f"{namespace}/{key}")


# -- stack and processes --------------------------------------------------------------------


def bench_settings(embedder: EmbedderName) -> Settings:
    """Settings of an embedder's benchmark stack: own data dir, own ports, the project's
    defaults for everything else."""
    offset = PORT_OFFSETS[embedder]
    ports = {name: port + offset for name, port in DEFAULT_PORTS.items()}
    # model_validate, not the constructor: no environment variable or .env is consulted.
    return Settings.model_validate({"data_dir": BENCH_DIR / embedder, "embedder": embedder,
                                    **ports})


def child_env(settings: Settings) -> dict[str, str]:
    """The environment that gives a pipeline process exactly `settings`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAINSTREAM_")}
    for name in sorted(settings.model_fields_set):
        value = getattr(settings, name)
        if value is None:
            continue
        if isinstance(value, dict):
            env[f"BRAINSTREAM_{name.upper()}"] = json.dumps(value)
        elif isinstance(value, Path):
            env[f"BRAINSTREAM_{name.upper()}"] = str(value.expanduser().resolve())
        else:
            env[f"BRAINSTREAM_{name.upper()}"] = str(value)
    env.update({"PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"})
    return env


def fresh_stack(settings: Settings) -> Stack:
    """Stop whatever an earlier run left on this data dir, wipe it, start and migrate anew, so
    every run measures empty stores."""
    stack = Stack(settings)
    stack.stop()
    shutil.rmtree(settings.resolved_data_dir, ignore_errors=True)
    stack.start()
    apply_migrations(settings)
    prepare_graph(settings)
    ensure_topics(settings)
    return stack


@dataclass
class PipelineProcesses:
    """The consumer, the embedding workers and the relay, as children of the benchmark."""

    settings: Settings
    workers: int
    children: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def commands(self) -> dict[str, list[str]]:
        """Each process's `brainstream` sub-command."""
        return {
            "consumer": ["consumer"],
            "worker": ["worker", "--queues", "celery", "--concurrency", str(self.workers),
                       "--beat"],
            "relay": ["worker", "--queues", "relay", "--concurrency", "1", "--no-beat"],
        }

    def start(self) -> None:
        """Start every process, logging to DATA_DIR/logs/bench-NAME.log."""
        log_dir = self.settings.resolved_data_dir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        env = child_env(self.settings)
        for name, argv in self.commands().items():
            with open(log_dir / f"bench-{name}.log", "ab") as log:
                self.children[name] = subprocess.Popen(
                    [sys.executable, "-m", "pipeline.cli", *argv], env=env, cwd=REPO,
                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def check_alive(self) -> None:
        """Raise if a pipeline process has exited (a benchmark of a dead pipeline is void)."""
        for name, proc in self.children.items():
            code = proc.poll()
            if code is not None:
                raise RuntimeError(f"pipeline process {name} exited with status {code}; see "
                                   f"{self.settings.resolved_data_dir / 'logs'}")

    def stop(self) -> None:
        """Terminate every process tree (Celery's pool children too)."""
        for proc in self.children.values():
            if proc.poll() is None:
                terminate_tree(proc.pid, timeout=20)
        self.children.clear()


# -- CPU accounting -------------------------------------------------------------------------


def _cpu_times(pid: int, *, recursive: bool) -> dict[int, float]:
    """CPU seconds (user + system) of a process, and of its descendants if `recursive`."""
    out: dict[int, float] = {}
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)] if recursive else [root]
    except psutil.NoSuchProcess:
        return out
    for proc in procs:
        try:
            times = proc.cpu_times()
            out[proc.pid] = times.user + times.system
        except psutil.NoSuchProcess:
            continue
    return out


class CpuMeter:
    """CPU seconds each component of the pipeline spent between `start` and `stop`.

    Processes that exit in between are not counted (their time is lost to psutil), so the totals
    are lower bounds; the pipeline's processes and servers are long-lived, so little is missed.
    The benchmark process is counted without its children (the pipeline processes).
    """

    def __init__(self, stack: Stack, processes: PipelineProcesses) -> None:
        self.roots: dict[str, list[int]] = {}
        for service in stack.services:
            pid = service.running_pid()
            if pid is not None:
                self.roots.setdefault(service.name, []).append(pid)
        for name, proc in processes.children.items():
            self.roots[name] = [proc.pid]
        self._before: dict[str, dict[int, float]] = {}
        self._wall = 0.0

    def _snapshot(self) -> dict[str, dict[int, float]]:
        snap: dict[str, dict[int, float]] = {}
        for name, pids in self.roots.items():
            merged: dict[int, float] = {}
            for pid in pids:
                merged.update(_cpu_times(pid, recursive=True))
            snap[name] = merged
        snap["bench"] = _cpu_times(os.getpid(), recursive=False)
        return snap

    def start(self) -> None:
        self._before = self._snapshot()
        self._wall = time.perf_counter()

    def stop(self) -> tuple[float, dict[str, float]]:
        """(wall seconds, CPU seconds by component) since `start`."""
        wall = time.perf_counter() - self._wall
        after = self._snapshot()
        used = {name: sum(t - self._before.get(name, {}).get(pid, 0.0)
                          for pid, t in times.items())
                for name, times in after.items()}
        return wall, used


# -- publishing and watching ----------------------------------------------------------------


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
            sent[str(object_id(namespace, key))] = time.time()
            self.publisher.send_event(put_envelope(namespace, key, doc))
        self.publisher.flush()
        return sent

    def close(self) -> None:
        self.producer.close()


_STAGES = """
SELECT o.id::text, extract(epoch FROM pe.processed_at), extract(epoch FROM last.created_at),
       extract(epoch FROM last.done_at)
FROM objects o
JOIN processed_events pe
  ON pe.namespace_id = o.namespace_id AND pe.source = %(source)s AND pe.event_id = o.event_id
JOIN (SELECT DISTINCT ON (aggregate_id) aggregate_id, created_at, done_at FROM outbox
      WHERE namespace_id = %(ns)s ORDER BY aggregate_id, id DESC) last
  ON last.aggregate_id = o.id
WHERE o.namespace_id = %(ns)s AND o.parent_id IS NULL
"""

STAGES = ("publish -> consumer batch starts", "-> embedding stored", "-> graph written",
          "-> change event received")


def stage_breakdown(settings: Settings, namespace: uuid.UUID, sent: dict[str, float],
                    indexed: dict[str, float]) -> dict[str, list[float]]:
    """Seconds each indexed document spent in each stage, from Postgres's timestamps.

    The consumer's batch transaction start (`processed_events.processed_at`), the start of the
    embedding transaction that completed the document (its last outbox row's `created_at`), and
    the relay's `done_at` on that row split the publish-to-indexed time into four stages.
    """
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        rows = conn.execute(_STAGES, {"ns": namespace, "source": SOURCE}).fetchall()
    out: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for oid, consumed, embedded, relayed in rows:
        if oid not in indexed or relayed is None:
            continue
        marks = [sent[oid], float(consumed), float(embedded), float(relayed), indexed[oid]]
        for stage, start, end in zip(STAGES, marks, marks[1:], strict=False):
            out[stage].append(end - start)
    return out


# -- reporting helpers ----------------------------------------------------------------------


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    model = platform.processor() or "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory = psutil.virtual_memory().total / 2**30
    return {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "cpus": str(os.cpu_count()), "cpu model": model, "memory": f"{memory:.0f} GiB",
            "python": platform.python_version(), "kernel": platform.release()}


def code_version() -> str:
    """The checked-out commit, and whether the working tree differs from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                              check=False).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"{commit}{' with uncommitted changes' if dirty else ''}"


def load_average() -> str:
    """The 1-minute load average (other work on the machine skews every figure)."""
    return f"{os.getloadavg()[0]:.2f}"


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation; infinities allowed."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    if rank == low:
        return ordered[low]  # also keeps an infinite neighbour from turning it into NaN
    return ordered[low] + (ordered[low + 1] - ordered[low]) * (rank - low)


def batches(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield items[start:start + size]
