"""One ingest phase: a fresh database and topics on the running stack, fresh hosts over them,
the documents published through their APIs and timed until settled everywhere."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg
from psycopg import sql

from bench.harness.hosts import PORTS_PER_HOST, Host, shared_env
from bench.harness.runenv import BENCH_DIR, load_average, log
from bench.hosts.meter import Meter
from bench.ingest.corpus import Doc, cycle_docs, object_id
from pipeline.ops.migrations import apply_migrations
from pipeline.services.stack import Stack
from pipeline.settings import Settings

PORT_OFFSET = 2150 + int(os.environ.get("BRAINSTREAM_TEST_PORT_OFFSET", "0"))
HOST_PORT_BASE = 8000 + PORT_OFFSET  # a host's API port; its metrics ports follow
BATCH = 100  # events per POST /v1/events
SETTLE_TIMEOUT = 900.0


@dataclass
class Phase:
    """One ingest: how many hosts, how long until settled, the CPU spent meanwhile."""

    hosts: int
    docs: int
    seconds: float
    published: float  # seconds the publishing took
    cpu: dict[str, float]  # component -> CPU seconds
    load: tuple[str, str]

    @property
    def rate(self) -> float:
        return self.docs / self.seconds


# -- the shared services, per phase ----------------------------------------------------------


def phase_settings(stack: Settings, label: str, redis_db: int, partitions: int) -> Settings:
    """A fresh, migrated database, and a graph, topics and Celery broker database of the
    phase's own, on the running stack."""
    name = f"hosts_{label}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(stack.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    settings = stack.model_copy(update={
        "postgres_dsn": stack.effective_postgres_dsn.rsplit("/", 1)[0] + f"/{name}",
        "kafka_bootstrap": stack.effective_kafka_bootstrap,
        "falkordb_url": stack.effective_falkordb_url,
        "redis_url": f"redis://127.0.0.1:{stack.redis_port}/{redis_db}",
        "graph_name": name, "topic_events": f"{name}.events", "topic_dlq": f"{name}.dlq",
        "topic_changes": f"{name}.changes", "topic_partitions": partitions})
    apply_migrations(settings)
    return settings


def make_hosts(settings: Settings, count: int, key: str, ns: uuid.UUID, label: str
               ) -> list[Host]:
    record = {"name": "bench", "scopes": {str(ns): ["admin"]}, "publish_rate": 100_000,
              "max_in_flight": 256}
    env = {**shared_env(settings), "BRAINSTREAM_API_KEYS": json.dumps({key: record})}
    root = BENCH_DIR / "hosts" / "hosts" / label
    shutil.rmtree(root, ignore_errors=True)
    return [Host(f"{label}-{i}", root / str(i), HOST_PORT_BASE + i * PORTS_PER_HOST, env,
                 api_key=key) for i in range(count)]


def start_hosts(hosts: Sequence[Host]) -> None:
    for host in hosts:
        host.start()
    for host in hosts:
        log(f"host {host.name} ready in {host.wait_ready(timeout=300):.1f}s (API {host.url})")


# -- ingest ----------------------------------------------------------------------------------


# A few SciFact abstracts hold C1 control characters, which the API refuses in text.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def events_of(ns: uuid.UUID, docs: Sequence[tuple[str, Doc]]) -> list[dict[str, Any]]:
    """The put event of each document as the API takes it (its control characters dropped)."""
    out = []
    for key, doc in docs:
        data: dict[str, Any] = {"id": str(object_id(ns, key)), "kind": "doc",
                                "content": _CONTROL.sub("", doc.text)}
        if doc.title:
            data["title"] = _CONTROL.sub("", doc.title)
        out.append({"type": "brainstream.object.put", "id": f"{ns}/{key}", "data": data})
    return out


def publish(hosts: Sequence[Host], events: list[dict[str, Any]]) -> float:
    """The events in batches, the batches dealt out to the hosts' APIs, one thread per host;
    the seconds it took."""
    batches = [events[i:i + BATCH] for i in range(0, len(events), BATCH)]
    errors: list[str] = []

    def send(host: Host, mine: list[list[dict[str, Any]]]) -> None:
        with httpx.Client(headers=host.headers(), timeout=60) as client:
            for batch in mine:
                for _ in range(50):
                    response = client.post(host.url + "/v1/events", json={"events": batch})
                    if response.status_code != 429:
                        break
                    time.sleep(0.1)
                if response.status_code not in (200, 202):
                    errors.append(f"{host.name}: {response.status_code} {response.text[:200]}")
                    return

    started = time.perf_counter()
    threads = [threading.Thread(target=send, args=(host, batches[i::len(hosts)]))
               for i, host in enumerate(hosts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"publishing failed: {errors}")
    return time.perf_counter() - started


_UNSETTLED = """
SELECT (SELECT count(*) FROM objects WHERE namespace_id = %(ns)s AND parent_id IS NULL),
       (SELECT count(*) FROM objects o JOIN object_embeddings e ON e.id = o.id
          WHERE o.namespace_id = %(ns)s AND e.embed_status <> 'done')
     + (SELECT count(*) FROM entity_extraction WHERE namespace_id = %(ns)s
          AND status = 'pending')
     + (SELECT count(*) FROM outbox WHERE namespace_id = %(ns)s AND done_at IS NULL)
     + (SELECT count(*) FROM entity_proposal_queue q JOIN entities e ON e.id = q.entity_id
          WHERE e.namespace_id = %(ns)s AND e.merged_into IS NULL)
"""


def lexical_documents(host: Host, marker: str) -> int:
    """How many objects the host's lexical index holds the marker word of (every document of
    the run carries it): the facet count of a search for it, from the host's own index."""
    response = host.post("/v1/search", {"query": marker, "limit": 1,
                                        "facets": [{"field": "kind"}]})
    if response.status_code != 200:
        return -1
    buckets = (response.json().get("facets") or {}).get("kind", {}).get("buckets", [])
    return sum(int(b["count"]) for b in buckets)


def wait_settled(settings: Settings, ns: uuid.UUID, docs: int, hosts: Sequence[Host],
                 marker: str) -> float:
    """Until the namespace has every document, nothing left to embed, extract, propose or
    project, and every host's lexical index holds every document; the time (perf_counter)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    next_report = time.monotonic() + 10
    state: tuple[Any, ...] = ()
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            for host in hosts:
                if not host.running():
                    raise RuntimeError(f"host {host.name} lost a process: see {host.log_path}")
            row = conn.execute(_UNSETTLED, {"ns": ns}).fetchone()
            assert row is not None
            roots, left = int(row[0]), int(row[1])
            if roots == docs and left == 0:
                indexed = [lexical_documents(h, marker) for h in hosts]
                if all(n == docs for n in indexed):
                    return time.perf_counter()
                state = (roots, left, indexed)
            else:
                state = (roots, left)
            if time.monotonic() > next_report:
                log(f"  settling: {state} (documents, rows left, lexical per host)")
                next_report += 10
            time.sleep(0.25)
    raise RuntimeError(f"not settled after {SETTLE_TIMEOUT:.0f}s: {state}")


def ingest(stack: Stack, base: Settings, count: int, corpus: Sequence[Doc], docs: int,
           partitions: int, running: list[Host]) -> tuple[Phase, list[Host]]:
    """One phase: `count` fresh hosts over a fresh database; the hosts are left running (and
    added to `running` as soon as they exist, for the caller to stop whatever happens)."""
    label = "one" if count == 1 else "two"
    settings = phase_settings(base, label, redis_db=2 + count, partitions=partitions)
    ns, key = uuid.uuid4(), f"bench-{uuid.uuid4().hex}"
    hosts = make_hosts(settings, count, key, ns, label)
    running += hosts
    start_hosts(hosts)
    marker = f"hostsmark{uuid.uuid4().hex[:8]}"
    events = events_of(ns, cycle_docs(corpus, docs))
    for event in events:
        event["data"]["content"] += f" {marker}"
    meter = Meter(stack, hosts)
    load_before = load_average()
    log(f"[{label} host(s)] publishing {docs} documents through {count} API(s), "
        f"load {load_before}")
    meter.start()
    started = time.perf_counter()
    published = publish(hosts, events)
    settled = wait_settled(settings, ns, docs, hosts, marker)
    cpu = meter.stop()
    phase = Phase(count, docs, settled - started, published, cpu,
                  (load_before, load_average()))
    log(f"[{label} host(s)] settled in {phase.seconds:.1f}s: {phase.rate:.1f} docs/s")
    return phase, hosts


