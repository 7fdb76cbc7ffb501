"""A fair share for every tenant (issue 35, items 4, 6 and 7) against real `brainstream api`
processes: one key cannot take every read connection, every in-flight place across the
workers, every publishing thread or the process's request capacity, and a request without a
known key costs nothing.

A slow database is a table held under an ACCESS EXCLUSIVE lock (the reads of it wait, in
`pg_stat_activity`, until it is released); a slow broker is a port that accepts connections and
never answers. No assertion is about wall-clock time.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import psutil
import psycopg
import pytest

from pipeline.kafka.publish_pool import PUBLISH_THREADS
from pipeline.settings import Settings
from tests.apiprocess import ApiProcess, free_port, serve_api
from tests.hostile.test_api_limits import RawRequest, table_locked
from tests.memory.memutil import add, message, session_put
from tests.pipelineutil import apply_only, ingest, put, wait_for
from tests.stackutil import settings_env

pytestmark = pytest.mark.stack

SESSION = "fair-share"


@dataclass
class Tenants:
    a: uuid.UUID
    b: uuid.UUID
    a_object: str
    b_object: str
    a_key: str = f"fair-a-{uuid.uuid4().hex[:8]}"
    b_key: str = f"fair-b-{uuid.uuid4().hex[:8]}"

    def keys(self, **limits: float) -> dict[str, dict[str, Any]]:
        """API_KEYS: both keys write in their namespace, with these limits on their records."""
        return {key: {"name": f"fair-{name}", "scopes": {str(ns): ["write"]}, **limits}
                for name, key, ns in (("a", self.a_key, self.a), ("b", self.b_key, self.b))}

    @staticmethod
    def auth(key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def tenants(catalog: Settings) -> Tenants:
    """A: a company and a conversation; B: a company."""
    a, b = uuid.uuid4(), uuid.uuid4()
    a_object, b_object = str(uuid.uuid4()), str(uuid.uuid4())
    ingest(catalog, [put(a, id=a_object, kind="company", title="Anchor Cranes Ltd"),
                     put(b, id=b_object, kind="company", title="Harbour Tugs Ltd")])
    apply_only(catalog, [session_put(a, SESSION, user_id="kim"),
                         add(a, SESSION, *(message(f"The harbour crane {i} needs new cables.")
                                           for i in range(5)))])
    return Tenants(a, b, a_object, b_object)


@contextmanager
def running_api(catalog: Settings, tenants: Tenants, *, ready: bool = True,
                limits: dict[str, float] | None = None, **env: str) -> Iterator[ApiProcess]:
    """A `brainstream api` process on a free port with these BRAINSTREAM_* overrides and the
    keys' `limits`, once it is ready (or only live: `ready=False`)."""
    port = free_port()
    full = {**settings_env(catalog),
            "BRAINSTREAM_API_KEYS": json.dumps(tenants.keys(**(limits or {}))),
            "BRAINSTREAM_API_STATEMENT_TIMEOUT": "60",
            **{f"BRAINSTREAM_{k.upper()}": v for k, v in env.items()}}
    log_path = catalog.resolved_data_dir / "hostile-logs" / f"fair-api-{port}.log"
    with serve_api(full, log_path, port=port, ready=ready) as api:
        yield api


@pytest.fixture(scope="module")
def api(catalog: Settings, tenants: Tenants) -> Iterator[ApiProcess]:
    """One API process (its read pool: 8, so one key's share is 6 and its in-flight cap 64),
    a per-key limit that is not the one under test, and a slow publish rate."""
    with running_api(catalog, tenants, api_workers="1", api_request_timeout="15",
                     limits={"max_in_flight": 100, "publish_rate": 0.5}) as api:
        yield api


def _waiting_reads(catalog: Settings) -> int:
    """The API's read connections waiting on a lock now."""
    with psycopg.connect(catalog.effective_postgres_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type ="
                           " 'Lock' AND application_name = 'brainstream-read'").fetchone()
    return int(row[0]) if row else 0


def _head(raw: RawRequest) -> dict[str, str]:
    head = bytes(raw.answer).partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")[1:]
    return {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head)}


# -- item 7: strangers cost nothing; the process has a cap ------------------------------------

@pytest.mark.parametrize("auth", [{}, {"Authorization": "Bearer no-such-key"}])
def test_a_request_without_a_known_key_gets_401_before_its_body_is_sent(
        api: ApiProcess, auth: dict[str, str]) -> None:
    """A body of 900 KB declared (under the body limit), not a byte of it sent: the 401 comes
    anyway (before, the server waited for the body and answered 408 at the deadline)."""
    raw = RawRequest(api.port, "/v1/search", {"Content-Type": "application/json",
                                               "Content-Length": str(900_000), **auth})
    status, body = raw.response()
    assert (status, body["error"]["code"], body["error"]["field"]) == (
        401, "unauthorized", "Authorization")
    assert raw.sent == 0
    assert api.healthz() == 200


def test_the_process_answers_503_past_its_in_flight_cap(api: ApiProcess, tenants: Tenants) -> None:
    """Requests of a known key whose bodies never come fill the process's cap (64 with a pool
    of 8); the next request, of either tenant, answers 503 `overloaded` with Retry-After while
    /healthz still answers; once they go, requests are served again."""
    held = [RawRequest(api.port, "/v1/search", {"Content-Type": "application/json",
                                                 "Content-Length": "100",
                                                 **Tenants.auth(tenants.a_key)})
            for _ in range(64)]
    extra: list[RawRequest] = []
    try:
        def refused() -> RawRequest | None:
            probe = RawRequest(api.port, "/v1/search", {
                "Content-Type": "application/json", "Content-Length": "100",
                **Tenants.auth(tenants.b_key)})
            extra.append(probe)
            return probe if _answered_soon(probe) else None

        overloaded = wait_for(refused, timeout=60, what="a request past the cap refused")
        status, body = overloaded.response()
        assert (status, body["error"]["code"]) == (503, "overloaded")
        assert _head(overloaded)["retry-after"] == "1"
        assert not any(h.answered for h in held)
        assert api.healthz() == 200
    finally:
        for raw in held + extra:
            raw.sock.close()
    wait_for(lambda: httpx.get(f"{api.url}/v1/objects/{tenants.b_object}", timeout=30,
                               headers=Tenants.auth(tenants.b_key)).status_code == 200,
             timeout=60, what="B served again")


def _answered_soon(raw: RawRequest) -> bool:
    """Whether the server answered `raw` (which sends no body) before it would have read one:
    an admitted request never answers before its deadline, a refused one at once."""
    return raw.closed.wait(2) or raw.answered


# -- item 4: connections -------------------------------------------------------------------

def test_b_is_served_while_a_holds_its_share_of_the_read_pool(
        api: ApiProcess, tenants: Tenants, catalog: Settings) -> None:
    """Twelve memory searches of A wait on a locked table: A holds at most its share (6 of
    the pool's 8, one connection per memory search) and B's read is served from the rest.
    Before, each memory search took one connection per channel and A took the whole pool:
    B waited out the pool and got 503."""
    def memory_search() -> httpx.Response:
        return httpx.post(f"{api.url}/v1/sessions/{SESSION}/search", timeout=60,
                          json={"query": "harbour crane"}, headers=Tenants.auth(tenants.a_key))

    with ThreadPoolExecutor(12) as pool:
        with table_locked(catalog, "messages"):
            searches = [pool.submit(memory_search) for _ in range(12)]
            wait_for(lambda: _waiting_reads(catalog) >= 6, timeout=30,
                     what="A's searches to wait on the lock")
            other = httpx.get(f"{api.url}/v1/objects/{tenants.b_object}", timeout=60,
                              headers=Tenants.auth(tenants.b_key))
            assert other.status_code == 200 and other.json()["id"] == tenants.b_object
            assert _waiting_reads(catalog) <= 6  # A's share, never the pool
        for done in searches:  # served once the lock went, or told its share stayed busy
            resp = done.result()
            assert resp.status_code == 200 or (
                resp.status_code, resp.json()["error"]["code"]) == (429, "too_many_requests")
            if resp.status_code == 429:
                assert resp.headers["retry-after"] == "1"
    assert memory_search().status_code == 200


def test_a_keys_in_flight_limit_holds_across_two_workers(
        catalog: Settings, tenants: Tenants) -> None:
    """Two workers, a limit of 2: four reads of A, two on each worker, wait on a locked table;
    two are in flight and two answer 429 (before, each worker counted its own 2: all four
    were in flight)."""
    per_key = 2
    with running_api(catalog, tenants, api_workers="2", api_request_timeout="30",
                     limits={"max_in_flight": per_key}) as api:
        conns = _connections_per_worker(api, per_key)
        path = f"/v1/objects/{tenants.a_object}"

        def read(conn: http.client.HTTPConnection) -> int:
            conn.request("GET", path, headers=Tenants.auth(tenants.a_key))
            resp = conn.getresponse()
            resp.read()
            return resp.status

        with ThreadPoolExecutor(len(conns)) as pool:
            with table_locked(catalog, "objects"):
                reads: list[Future[int]] = [pool.submit(read, c) for c in conns]
                wait_for(lambda: sum(f.done() for f in reads) >= len(conns) - per_key,
                         timeout=60, what="the reads over the key's limit refused")
                assert sorted(f.result() for f in reads if f.done()) == [429] * (
                    len(conns) - per_key)
                wait_for(lambda: _waiting_reads(catalog) >= per_key, timeout=30,
                         what="the admitted reads to wait on the lock")
                assert _waiting_reads(catalog) == per_key
            assert sorted(f.result() for f in reads) == [200] * per_key + [429] * (
                len(conns) - per_key)
        for conn in conns:
            conn.close()


def _connections_per_worker(api: ApiProcess, each: int) -> list[http.client.HTTPConnection]:
    """Keep-alive connections, `each` served by each of the API's two worker processes."""
    parent = psutil.Process(api.popen.pid)

    def spawned() -> list[psutil.Process]:
        return [c for c in parent.children(recursive=True)
                if "multiprocessing" in " ".join(c.cmdline())]

    workers = wait_for(lambda: spawned() if len(spawned()) >= 2 else None, timeout=60,
                       what="uvicorn's two worker processes")
    by_worker: dict[int, list[http.client.HTTPConnection]] = {w.pid: [] for w in workers}
    spare: list[http.client.HTTPConnection] = []

    def full() -> list[list[http.client.HTTPConnection]]:
        return [conns for conns in by_worker.values() if len(conns) == each]

    for _ in range(200):
        conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=60)
        conn.request("GET", "/healthz")
        conn.getresponse().read()
        assert conn.sock is not None
        mine = conn.sock.getsockname()[1]
        pid = next((w.pid for w in workers if any(
            c.raddr and c.raddr.port == mine for c in w.net_connections(kind="tcp"))), None)
        if pid is not None and len(by_worker[pid]) < each:
            by_worker[pid].append(conn)
        else:
            spare.append(conn)
        if len(full()) == 2:
            break
    chosen = full()
    for conn in spare + [c for conns in by_worker.values() if conns not in chosen
                         for c in conns]:
        conn.close()
    assert len(chosen) == 2, {pid: len(v) for pid, v in by_worker.items()}
    return [c for conns in chosen for c in conns]


# -- item 6: publishing --------------------------------------------------------------------

def _publish(api: ApiProcess, key: str, text: str = "hello") -> httpx.Response:
    return httpx.post(f"{api.url}/v1/sessions/{SESSION}/messages", timeout=60,
                      json={"messages": [message(text)]},
                      headers=Tenants.auth(key))


def test_publishes_over_a_keys_rate_get_429_and_another_key_still_publishes(
        api: ApiProcess, tenants: Tenants) -> None:
    answers = [_publish(api, tenants.a_key) for _ in range(6)]
    assert answers[0].status_code == 202, answers[0].text
    refused = [r for r in answers if r.status_code == 429]
    assert refused and all(r.json()["error"]["code"] == "too_many_requests"
                           and int(r.headers["retry-after"]) >= 1 for r in refused)
    assert _publish(api, tenants.b_key).status_code == 202


@contextmanager
def silent_broker() -> Iterator[int]:
    """A port that accepts connections and never answers: a broker that hangs."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join()
        for sock in accepted:
            sock.close()
        server.close()


def test_a_hung_broker_fills_the_publishing_threads_and_searches_still_answer(
        catalog: Settings, tenants: Tenants) -> None:
    """Against a broker that never answers, A's publishes take the publishing threads; more
    answer 503 `overloaded` at once, and B's searches (query embedding, snippets: threads of
    their own) are served meanwhile. Before, publishes queued on the shared default executor
    and searches waited behind them until the deadline."""
    with silent_broker() as port, running_api(
            catalog, tenants, api_workers="1", api_request_timeout="20",
            limits={"max_in_flight": 100}, memory_write_wait="25",
            kafka_bootstrap=f"127.0.0.1:{port}") as api, \
            ThreadPoolExecutor(PUBLISH_THREADS + 6) as pool:
        publishes = [pool.submit(_publish, api, tenants.a_key, f"m{i}")
                     for i in range(PUBLISH_THREADS + 6)]
        wait_for(lambda: sum(f.done() for f in publishes) >= 6, timeout=60,
                 what="the publishes past the threads refused")
        refused = [f.result() for f in publishes if f.done()]
        assert all((r.status_code, r.json()["error"]["code"]) == (503, "overloaded")
                   and r.headers["retry-after"] == "1" for r in refused), [
            r.text for r in refused]
        for _ in range(3):
            search = httpx.post(f"{api.url}/v1/search", json={"query": "harbour tugs"},
                                headers=Tenants.auth(tenants.b_key), timeout=60)
            assert search.status_code == 200, search.text
            assert [o["id"] for o in search.json()["objects"]] == [tenants.b_object]
        assert not all(f.done() for f in publishes)  # the threads are still taken


# -- Redis down: the limits hold per process --------------------------------------------------

def test_with_redis_down_the_limits_hold_per_process_with_one_warning(
        catalog: Settings, tenants: Tenants) -> None:
    """Redis unreachable: requests are still served (never a 500), the per-key limit holds in
    the process, and the log says so once."""
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = int(probe.getsockname()[1])
    with running_api(catalog, tenants, ready=False, api_workers="1",
                     limits={"max_in_flight": 1},
                     redis_url=f"redis://127.0.0.1:{dead}/0") as api:
        path = f"{api.url}/v1/objects/{tenants.a_object}"
        for _ in range(3):
            resp = httpx.get(path, headers=Tenants.auth(tenants.a_key), timeout=60)
            assert resp.status_code == 200, resp.text
        with ThreadPoolExecutor(1) as pool, table_locked(catalog, "objects"):
            held = pool.submit(httpx.get, path, headers=Tenants.auth(tenants.a_key),
                               timeout=60)
            wait_for(lambda: _waiting_reads(catalog) >= 1, timeout=30,
                     what="the read to wait on the lock")
            extra = httpx.get(path, headers=Tenants.auth(tenants.a_key), timeout=60)
            assert (extra.status_code, extra.json()["error"]["code"]) == (
                429, "too_many_requests")
        assert held.result().status_code == 200
        log = (catalog.resolved_data_dir / "hostile-logs" / f"fair-api-{api.port}.log")
        warnings = [line for line in log.read_text().splitlines()
                    if "per-key limits hold per API process" in line]
        assert len(warnings) == 1, warnings
