"""Two hosts on one machine over one set of services: documents published through both hosts'
APIs, one host killed outright mid-ingest, its partitions taken over by the other, a replacement
host with an empty data directory started; then, through both live APIs, every object is readable
once, searches answer the same, and `verify` and `lexical verify` are clean.

A host is one `brainstream up` (bench/harness/hosts.py) with its own DATA_DIR and ports, pointed
at the session's stack as external services: a database, a graph, a Celery broker database and
topics of this module's own (the input topic with the stack's 4 partitions), so `verify` judges
only what this module wrote and no other process of the session takes its tasks.

Each host runs in a network namespace of its own where the machine allows it (root, `unshare -n`
and `nsenter` work; bench/harness/netns.py): there every host listens on the same default ports
(API 8000, metrics 9101...) and reaches the shared services through a gate that forwards their
loopback ports (the embedded services listen on loopback, the broker advertises 127.0.0.1), its
API exposed on a port of its own outside. Where namespaces are refused, the hosts share the
machine's network and are told apart by their ports.

In the fault suite (slow): three supervisors of five processes each start on a 2-core machine.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bench.harness import netns
from bench.harness.hosts import PORTS_PER_HOST, Host, service_ports, shared_env
from pipeline.settings import Settings
from tests.faults.faultutil import (
    assert_graph_matches_postgres,
    long_content,
    rows,
    scalar,
    wait_converged,
)
from tests.faults.test_scale_out import assignments
from tests.pipelineutil import wait_for
from tests.stackutil import TEST_DATA_DIR, TEST_PORTS, fresh_database

pytestmark = [pytest.mark.stack, pytest.mark.slow]
log = logging.getLogger(__name__)

OBJECTS = 240
BATCH = 20  # events per POST /v1/events
# Seconds between batches: a stream of several seconds, so the kill lands mid-ingest (sent at
# once, the consumers applied most of it before the kill).
PACE = 0.5
REDIS_DB = 11  # the Celery broker database of these hosts: no other process takes their tasks
# Host ports start here (API, consumer metrics, worker metrics + 2), clear of the stack's ports
# and of the session's pipeline metrics ports, moved by the same offset.
HOST_PORT_BASE = 23100 + (TEST_PORTS["pg_port"] - 25432)
# How long the two replicas may disagree after the pipeline settled: LEXICAL_REPLICA_MAX_LAG
# (pipeline/lexical) and a follower's poll, with room for a loaded machine.
STALENESS_TIMEOUT = 60.0


def _key_record(name: str, ns: uuid.UUID) -> dict[str, Any]:
    # a publisher sending through two APIs at once must not meet the per-key rate limit
    return {"name": name, "scopes": {str(ns): ["admin"]}, "publish_rate": 10_000,
            "max_in_flight": 64}


@pytest.fixture(scope="module")
def shared(stack_settings: Settings) -> Settings:
    """A database, graph, topics and Celery broker database of this module on the stack."""
    tag = uuid.uuid4().hex[:8]
    return fresh_database(
        stack_settings, "hosts", example_catalog=True,
        redis_url=f"redis://127.0.0.1:{stack_settings.redis_port}/{REDIS_DB}",
        graph_name=f"hosts_{tag}", topic_events=f"hosts-{tag}.events",
        topic_dlq=f"hosts-{tag}.events.dlq", topic_changes=f"hosts-{tag}.changes")


class Tenants:
    def __init__(self) -> None:
        self.ns, self.other_ns = uuid.uuid4(), uuid.uuid4()
        self.key, self.other_key = f"hosts-{uuid.uuid4().hex}", f"other-{uuid.uuid4().hex}"

    def env(self) -> dict[str, str]:
        import json
        return {"BRAINSTREAM_API_KEYS": json.dumps({
            self.key: _key_record("hosts", self.ns),
            self.other_key: _key_record("other", self.other_ns)})}


@pytest.fixture(scope="module")
def hosts(shared: Settings) -> Iterator[tuple[Tenants, dict[str, Host]]]:
    """Hosts a and b started and ready; c (the replacement) made but not started."""
    tenants = Tenants()
    env = {**shared_env(shared), **tenants.env(),
           "BRAINSTREAM_SWEEP_INTERVAL": "1", "BRAINSTREAM_EMBED_LEASE_SECONDS": "5"}
    root = TEST_DATA_DIR / f"hosts-{uuid.uuid4().hex[:6]}"
    reach = service_ports(shared) if netns.usable() else ()
    made = {name: Host(name, root / name, HOST_PORT_BASE + i * PORTS_PER_HOST, env,
                       api_key=tenants.key, reach=reach)
            for i, name in enumerate("abc")}
    try:
        made["a"].start()
        made["b"].start()
        for name in "ab":
            log.info("host %s ready in %.1fs", name, made[name].wait_ready())
        yield tenants, made
    finally:
        for host in made.values():
            host.stop()


def _put(ns: uuid.UUID, i: int) -> dict[str, Any]:
    oid = str(uuid.uuid5(ns, f"doc-{i}"))
    return {"type": "brainstream.object.put", "id": f"put-{i}",
            "data": {"id": oid, "kind": "note", "title": f"Host note {i:04d} {oid[:8]}",
                     "content": long_content(f"h{i}q", paragraphs=3, words=90)}}


class TwoApiPublisher:
    """Publishes the batches in a thread, alternating between the hosts' APIs; a batch a host
    fails to take (killed, refusing) goes to the next host, with the same event ids (applied
    once)."""

    def __init__(self, hosts: list[Host], batches: list[list[dict[str, Any]]]) -> None:
        self.hosts = hosts
        self.batches = batches
        self.through: dict[str, int] = {h.name: 0 for h in hosts}
        self.failovers = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="two-api-publisher", daemon=True)

    def start(self) -> TwoApiPublisher:
        self.thread.start()
        return self

    def _send(self, host: Host, batch: list[dict[str, Any]]) -> bool:
        try:
            response = host.post("/v1/events", {"events": batch}, timeout=30)
        except httpx.TransportError:
            return False
        if response.status_code == 429:
            time.sleep(0.2)
            return False
        assert response.status_code in (200, 202), response.text
        return True

    def _run(self) -> None:
        try:
            for i, batch in enumerate(self.batches):
                for attempt in range(20):
                    host = self.hosts[(i + attempt) % len(self.hosts)]
                    if self._send(host, batch):
                        self.through[host.name] += len(batch)
                        break
                    self.failovers += 1
                else:
                    raise AssertionError(f"no host took batch {i}")
                time.sleep(PACE)
        except BaseException as exc:
            self.error = exc

    def wait(self, timeout: float) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the publisher did not finish"
        if self.error is not None:
            raise self.error


def _netns(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


def _ledger(settings: Settings, ns: uuid.UUID) -> int:
    return int(scalar(settings, "SELECT count(*) FROM processed_events WHERE namespace_id = %s",
                      ns))


def _owned(host: Host, topic: str, since: int) -> set[int]:
    """The partitions of `topic` the host's consumer holds after its latest assignment logged
    past byte `since` of its log."""
    path = host.data_dir / "logs" / "consumer.log"
    if not path.exists():
        return set()
    with open(path, "rb") as fh:
        fh.seek(since)
        text = fh.read().decode("utf-8", "replace")
    return (assignments(text, topic) or [set()])[-1]


def _log_size(host: Host) -> int:
    path = host.data_dir / "logs" / "consumer.log"
    return path.stat().st_size if path.exists() else 0


def _search_ids(host: Host, path: str, body: dict[str, Any]) -> list[str]:
    response = host.post(path, body)
    assert response.status_code == 200, f"{host.name} {path}: {response.text}"
    return [o["id"] for o in response.json()["objects"]]


def _queries(ns: uuid.UUID) -> list[dict[str, Any]]:
    """Searches whose answers both hosts must agree on: a document's own words (lexical,
    hybrid) and a word every document holds (many ties)."""
    out: list[dict[str, Any]] = []
    for i in range(0, OBJECTS, OBJECTS // 6):
        out.append({"query": f"h{i}qw1x7", "mode": "hybrid", "limit": 5})
        out.append({"query": f"h{i}qw2x14 lorem", "limit": 10})
    out.append({"query": "lorem", "limit": 20})
    return out


def _answers(host: Host, ns: uuid.UUID) -> list[list[str]]:
    return [_search_ids(host, "/v1/search", q) for q in _queries(ns)]


def test_two_hosts_one_killed_mid_ingest_and_replaced(
        shared: Settings, hosts: tuple[Tenants, dict[str, Host]]) -> None:
    tenants, by_name = hosts
    a, b, c = by_name["a"], by_name["b"], by_name["c"]
    ns, topic = tenants.ns, shared.topic_events
    every = set(range(shared.topic_partitions))

    # both consumers hold partitions of the input topic
    wait_for(lambda: _owned(a, topic, 0) and _owned(b, topic, 0)
             and _owned(a, topic, 0) | _owned(b, topic, 0) == every,
             timeout=120, interval=0.5, what="hosts a and b sharing the input topic's partitions")
    split = {"a": sorted(_owned(a, topic, 0)), "b": sorted(_owned(b, topic, 0))}
    if a.reach:  # each host's processes in a network namespace of its own
        spaces = {name: {_netns(pid) for pid in host.pids().values()}
                  for name, host in (("a", a), ("b", b))}
        assert len(spaces["a"]) == len(spaces["b"]) == 1, spaces
        assert len(spaces["a"] | spaces["b"] | {_netns(os.getpid())}) == 3, spaces

    events = [_put(ns, i) for i in range(OBJECTS)]
    batches = [events[i:i + BATCH] for i in range(0, OBJECTS, BATCH)]
    started = time.monotonic()
    publisher = TwoApiPublisher([a, b], batches).start()

    wait_for(lambda: _ledger(shared, ns) >= OBJECTS // 3, timeout=180, interval=0.1,
             what="a third of the events applied")
    b_mark = _log_size(b)
    killed = a.kill9()
    at_kill = _ledger(shared, ns)
    killed_at = time.monotonic()
    assert at_kill < OBJECTS, f"all {OBJECTS} events were applied before the kill"
    assert not any(p.is_running() for p in a.processes()), "host a left processes running"

    wait_for(lambda: _owned(b, topic, b_mark) == every, timeout=120, interval=0.5,
             what=f"host b to take over host a's partitions {split['a']}")
    takeover = time.monotonic() - killed_at
    publisher.wait(timeout=300)
    assert publisher.through["a"] > 0 and publisher.through["b"] > 0, publisher.through

    # the replacement: an empty data directory; not ready until its replica caught up
    c.start()
    seen: list[tuple[int, dict[str, Any]]] = []

    def c_ready() -> bool:
        status, body = c.readyz()
        if status and (not seen or seen[-1][0] != status):
            seen.append((status, body))
        return status == 200 and c.running()

    wait_for(c_ready, timeout=240, interval=0.2, what=f"host c ready (see {c.log_path})")
    # ready means caught up: the first answers after /readyz said so hold every document
    # published before c started
    c_first = _answers(c, ns)

    state = wait_converged(shared, ns, objects=OBJECTS, timeout=300)
    assert_graph_matches_postgres(shared, ns)
    assert _ledger(shared, ns) == OBJECTS

    # through both live APIs: every object once, with its parts
    parts = dict(rows(shared, "SELECT parent_id::text, count(*) FROM objects WHERE"
                      " namespace_id = %s AND parent_id IS NOT NULL GROUP BY 1", ns))
    for event in events:
        oid, title = event["data"]["id"], event["data"]["title"]
        assert parts.get(oid, 0) >= 2, f"{oid} has {parts.get(oid, 0)} parts"
        for host in (b, c):
            got = host.get(f"/v1/objects/{oid}")
            assert got.status_code == 200, f"{host.name}: {got.text}"
            assert got.json()["title"] == title
            children = host.get(f"/v1/objects/{oid}/children?limit=100")
            assert children.status_code == 200, children.text
            assert len(children.json()["objects"]) == parts[oid], (host.name, oid)
            found = _search_ids(host, "/v1/find_exact", {"query": title, "limit": 5})
            assert found.count(oid) == 1 and found[0] == oid, (host.name, title, found)

    # the other tenant reads none of it, on either host
    for host in (b, c):
        response = httpx.get(f"{host.url}/v1/objects/{events[0]['data']['id']}",
                             headers={"Authorization": f"Bearer {tenants.other_key}"},
                             timeout=30)
        assert response.status_code == 404, response.text

    # searches answer the same on both hosts within the staleness bound
    answers: dict[str, list[list[str]]] = {}

    def same() -> bool:
        answers.update(b=_answers(b, ns), c=_answers(c, ns))
        return answers["b"] == answers["c"]

    try:
        wait_for(same, timeout=STALENESS_TIMEOUT, interval=1.0,
                 what="hosts b and c to answer the searches alike")
    except AssertionError:
        differ = [(q["query"], len(x), len(y)) for q, x, y in
                  zip(_queries(ns), answers["b"], answers["c"], strict=True) if x != y]
        raise AssertionError(f"{len(differ)} of {len(answers['b'])} searches answer differently "
                             f"on hosts b and c after {STALENESS_TIMEOUT:.0f}s (query, hits on "
                             f"b, hits on c): {differ}") from None
    assert all(answers["b"]), "a search found nothing"
    assert c_first == answers["c"], "host c answered differently right after it was ready"

    # and the checks of an operator
    for host in (b,):
        verify = host.cli("verify")
        assert verify.returncode == 0, verify.stdout + verify.stderr
    for host in (b, c):
        lexical = host.cli("lexical", "verify")
        assert lexical.returncode == 0, f"{host.name}: {lexical.stdout}{lexical.stderr}"

    log.info("two hosts (%s): partitions %s; %d processes of host a killed at %d/%d events "
             "applied; b held every partition %.1fs later; published %s with %d failovers; "
             "c's /readyz went %s; converged %s in %.1fs",
             "network namespaces" if a.reach else "one network", split, killed, at_kill,
             OBJECTS, takeover, publisher.through, publisher.failovers,
             [(s, body.get("reasons") or body.get("code")) for s, body in seen], state,
             time.monotonic() - started)
