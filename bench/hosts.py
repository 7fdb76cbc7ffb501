"""Two hosts against one: documents/s until settled and searches/s, with one `brainstream up`
host and with two over the same services, in one run.

1. One embedded stack of its own (`.brainstream-bench/hosts`, ports = defaults + 2150 +
   BRAINSTREAM_TEST_PORT_OFFSET), started once; the hosts use it as external services
   (bench/harness/hosts.py: a host is one `brainstream up` with its own DATA_DIR and ports: a
   consumer, the embedding, extraction and relay workers, an API with API_WORKERS=1).
2. Per phase (one host, then two hosts) a fresh database, graph, Celery broker database and
   topics (the input topic with `--partitions` partitions, so two consumers split it), the
   static embedder, and fresh host data directories: each phase starts from empty stores.
3. Ingest: `--docs` SciFact abstracts published through the hosts' APIs (`POST /v1/events`,
   batches of 100; with two hosts half through each), timed from the first publish until
   settled: every document embedded and projected into the graph, nothing left to extract,
   propose or relay, and every host's lexical index holding every document (`settled`).
   Documents/s = docs / that time; the CPU every process group spent meanwhile, per host
   process and per shared service, says what bounds the ratio.
4. Searches (after the two-host ingest, on its data): `--clients` closed-loop clients for
   `--seconds` each, all through one host's API, then split between the two APIs; the same
   hybrid queries (words of the documents' titles).
5. Report: documents/s with one host and with two and their ratio, searches/s through one API
   and through two and their ratio, the cores each component kept busy, PASS/FAIL.

Targets. The two hosts share this machine's cores with each other and with every service, so
two hosts cannot be twice as fast as one here: on a 2-core machine one host's pipeline already
keeps the cores busy. The honest target is that scaling out costs nothing: two hosts >= 0.9x one
host in documents/s (the 10% is the second set of idle processes, a second consumer's
rebalance and the load other work puts on the machine between the phases), and the same for
searches/s through two APIs. Past one machine the figures add up host by host; that is what
the partitions, the shared queues and the per-host lexical index are for.

    python -m bench.hosts [--docs 2000] [--partitions 4] [--clients 4] [--seconds 10]
                          [--quick] [--out FILE]
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import shutil
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
from psycopg import sql

from bench.harness.hosts import PORTS_PER_HOST, Host, shared_env
from bench.harness.inprocess import bench_settings, bench_stack, md_table
from bench.harness.runenv import (
    BENCH_DIR,
    bench_parser,
    emit_report,
    load_average,
    log,
    machine_lines,
    quiet_logging,
)
from bench.ingest.corpus import Doc, cycle_docs, load_corpus, object_id
from pipeline.ops.migrations import apply_migrations
from pipeline.services.stack import Stack
from pipeline.settings import Settings

PORT_OFFSET = 2150 + int(os.environ.get("BRAINSTREAM_TEST_PORT_OFFSET", "0"))
HOST_PORT_BASE = 8000 + PORT_OFFSET  # a host's API port; its metrics ports follow
BATCH = 100  # events per POST /v1/events
TARGET_INGEST_RATIO = 0.9  # two hosts' documents/s against one host's, at least
TARGET_SEARCH_RATIO = 0.9  # searches/s through two APIs against one, at least
SETTLE_TIMEOUT = 900.0
# The CPU every process of the machine spent (other work's too): beside ours, it says whether
# the machine was saturated.
MACHINE = "machine (every process, others' too)"
QUICK = {"docs": 400, "seconds": 5.0}


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


@dataclass
class SearchRun:
    apis: int
    requests: int
    errors: int
    seconds: float
    cpu: dict[str, float]

    @property
    def rate(self) -> float:
        return self.requests / self.seconds


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


# -- CPU of every process group --------------------------------------------------------------


class Meter:
    """CPU seconds per component: each host process (by name, summed over the hosts), each
    shared service, and this benchmark."""

    def __init__(self, stack: Stack, hosts: Sequence[Host]) -> None:
        self.services = {s.name: pid for s in stack.services
                         if (pid := s.running_pid()) is not None}
        self.hosts = hosts
        self.before: dict[str, float] = {}

    def snapshot(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for host in self.hosts:
            for name, cpu in host.cpu_by_process().items():
                out[f"host {name}"] = out.get(f"host {name}", 0.0) + cpu
        for name, pid in self.services.items():
            try:
                root = psutil.Process(pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for proc in procs:
                try:
                    times = proc.cpu_times()
                except psutil.NoSuchProcess:
                    continue
                out[name] = out.get(name, 0.0) + times.user + times.system
        own = psutil.Process().cpu_times()
        out["benchmark"] = own.user + own.system
        every = psutil.cpu_times()
        out[MACHINE] = every.user + every.nice + every.system + every.irq + every.softirq
        return out

    def start(self) -> None:
        self.before = self.snapshot()

    def stop(self) -> dict[str, float]:
        after = self.snapshot()
        return {k: v - self.before.get(k, 0.0) for k, v in after.items()}


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


# -- searches --------------------------------------------------------------------------------


def queries(corpus: Sequence[Doc], count: int = 200) -> list[str]:
    rng = random.Random(7)
    titled = [d for d in corpus if len(d.title.split()) >= 3]
    return [" ".join(rng.sample(d.title.split(), 3)) for d in rng.sample(titled, count)]


async def closed_loop(hosts: Sequence[Host], clients: int, seconds: float,
                      texts: Sequence[str]) -> tuple[int, int, float]:
    """`clients` clients, dealt out to the hosts' APIs, each sending its next search when the
    last answered, for `seconds`; (answers, errors, wall seconds)."""
    done = errors = 0
    deadline = time.perf_counter() + seconds

    async def client(i: int) -> None:
        nonlocal done, errors
        host = hosts[i % len(hosts)]
        async with httpx.AsyncClient(base_url=host.url, headers=host.headers(),
                                     timeout=30) as http:
            n = i
            while time.perf_counter() < deadline:
                response = await http.post("/v1/search", json={"query": texts[n % len(texts)],
                                                               "limit": 10})
                if response.status_code == 200:
                    done += 1
                else:
                    errors += 1
                n += clients

    started = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    return done, errors, time.perf_counter() - started


def search_run(stack: Stack, hosts: Sequence[Host], apis: int, clients: int, seconds: float,
               texts: Sequence[str]) -> SearchRun:
    meter = Meter(stack, hosts)
    asyncio.run(closed_loop(hosts[:apis], clients, 2.0, texts))  # warm both paths
    meter.start()
    done, errors, wall = asyncio.run(closed_loop(hosts[:apis], clients, seconds, texts))
    run = SearchRun(apis, done, errors, wall, meter.stop())
    log(f"[searches] {apis} API(s), {clients} clients: {run.rate:.1f}/s, {errors} errors")
    return run


# -- report ----------------------------------------------------------------------------------


def cpu_table(runs: Sequence[tuple[str, float, dict[str, float]]]) -> str:
    """Cores each component kept busy (CPU seconds / wall seconds) per run."""
    names = sorted({k for _, _, cpu in runs for k in cpu} - {MACHINE},
                   key=lambda k: -max(cpu.get(k, 0.0) / wall for _, wall, cpu in runs))
    rows: list[list[object]] = [
        [name, *(f"{cpu.get(name, 0.0) / wall:.2f}" for _, wall, cpu in runs)] for name in names]
    rows.append(["**all of ours**", *(
        f"{sum(v for k, v in cpu.items() if k != MACHINE) / wall:.2f}" for _, wall, cpu in runs)])
    rows.append([MACHINE, *(f"{cpu.get(MACHINE, 0.0) / wall:.2f}" for _, wall, cpu in runs)])
    return md_table(["component (cores busy)", *(label for label, _, _ in runs)], rows)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def report(one: Phase, two: Phase, searches: tuple[SearchRun, SearchRun], clients: int,
           cores: int) -> str:
    ingest_ratio = two.rate / one.rate
    search_ratio = searches[1].rate / searches[0].rate
    busy = [(f"ingest, {p.hosts} host(s)", p.seconds, p.cpu) for p in (one, two)]
    busy += [(f"searches, {s.apis} API(s)", s.seconds, s.cpu) for s in searches]
    lines = [
        "# Two hosts against one", "", *machine_lines(), "",
        f"Static embedder, {one.docs} SciFact documents per phase, published through the "
        "hosts' APIs (half through each with two), timed until settled (embedded, projected, "
        f"in every host's lexical index); {clients} closed-loop search clients.", "",
        md_table(["run", "hosts", "seconds", "rate", "publish s", "load before/after"], [
            ["ingest", 1, f"{one.seconds:.1f}", f"{one.rate:.1f} docs/s",
             f"{one.published:.1f}", "/".join(one.load)],
            ["ingest", 2, f"{two.seconds:.1f}", f"{two.rate:.1f} docs/s",
             f"{two.published:.1f}", "/".join(two.load)],
            ["searches", "1 API", f"{searches[0].seconds:.1f}",
             f"{searches[0].rate:.1f} /s ({searches[0].errors} errors)", "", ""],
            ["searches", "2 APIs", f"{searches[1].seconds:.1f}",
             f"{searches[1].rate:.1f} /s ({searches[1].errors} errors)", "", ""]]),
        "",
        md_table(["target", "figure", "verdict"], [
            [f"two hosts' docs/s >= {TARGET_INGEST_RATIO}x one host's", f"{ingest_ratio:.2f}x",
             verdict(ingest_ratio >= TARGET_INGEST_RATIO)],
            [f"searches/s through two APIs >= {TARGET_SEARCH_RATIO}x one",
             f"{search_ratio:.2f}x",
             verdict(search_ratio >= TARGET_SEARCH_RATIO and not searches[1].errors)]]),
        "",
        f"What bounds the ratio: the cores each component kept busy ({cores} cores here; the "
        "machine's row near the core count means the cores, not the pipeline, are the limit, "
        "and a second host can only share them; ours well below it with the machine's near it: "
        "other work took the cores):", "",
        cpu_table(busy),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = bench_parser(__doc__, "python -m bench.hosts")
    parser.add_argument("--docs", type=int, default=2000, help="documents per phase")
    parser.add_argument("--partitions", type=int, default=4,
                        help="partitions of the input topic")
    parser.add_argument("--clients", type=int, default=4, help="closed-loop search clients")
    parser.add_argument("--seconds", type=float, default=10.0, help="per search run")
    parser.add_argument("--quick", action="store_true",
                        help=f"a smoke run: {QUICK['docs']} docs, {QUICK['seconds']:.0f}s "
                             "search runs")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    if args.quick:
        args.docs, args.seconds = QUICK["docs"], QUICK["seconds"]
    quiet_logging()
    settings = bench_settings("hosts", PORT_OFFSET, "static")
    corpus = load_corpus()
    running: list[Host] = []
    with bench_stack(settings, fresh=True) as stack:
        try:
            one, hosts = ingest(stack, settings, 1, corpus, args.docs, args.partitions,
                                running)
            for host in hosts:
                host.stop()
            two, hosts = ingest(stack, settings, 2, corpus, args.docs, args.partitions,
                                running)
            texts = queries(corpus)
            searches = (search_run(stack, hosts, 1, args.clients, args.seconds, texts),
                        search_run(stack, hosts, 2, args.clients, args.seconds, texts))
        finally:
            for host in running:
                host.stop()
    emit_report(report(one, two, searches, args.clients, os.cpu_count() or 1), args.out)


if __name__ == "__main__":
    main()
