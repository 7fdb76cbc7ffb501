"""Issue 13 item 3: the API runs as many worker processes as cores by default, each with a read
pool sized to share the connection budget, and a `continue` token one worker made is honoured by
another (result sets live in Redis), for its own tenant only. Issue 35 item 8: `/readyz` is what
every worker of the instance agrees on, whichever worker answers."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from pipeline.settings import Settings
from tests.pipelineutil import ingest, put, wait_for
from tests.stackutil import make_settings, settings_env


def test_api_workers_default_to_the_cores_and_pools_share_the_budget() -> None:
    settings = make_settings()
    assert settings.api_workers == (psutil.cpu_count() or 1)
    assert make_settings(api_workers=2).api_pool_size == 8  # 2 x 8 x 2 <= 200
    assert make_settings(api_workers=20).api_pool_size == 4  # (200 // 20 - 1 build) // 2
    assert make_settings(api_workers=64).api_pool_size == 2  # the floor


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture()
def two_workers(catalog: Settings) -> Iterator[tuple[int, psutil.Process, dict[str, Any]]]:
    """`brainstream api` with API_WORKERS=2 over two tenants' data: (port, the uvicorn parent,
    the tenants' keys and namespaces)."""
    tenants = {name: (uuid.uuid4(), f"key-{name}-{uuid.uuid4().hex[:8]}") for name in "ab"}
    for ns, _ in tenants.values():
        ingest(catalog, [put(ns, kind="company", title=f"Acme Robotics {i}",
                             summary="Acme builds robot arms.") for i in range(4)])
    port = _free_port()
    env = {**settings_env(catalog), "BRAINSTREAM_API_WORKERS": "2",
           "BRAINSTREAM_API_PORT": str(port),
           "BRAINSTREAM_API_KEYS": json.dumps({key: [str(ns)] for ns, key in tenants.values()})}
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "api"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    parent = psutil.Process(proc.pid)
    try:
        wait_for(lambda: _answers(port), timeout=120, what="the API to serve")
        yield port, parent, {name: key for name, (_, key) in tenants.items()}
    finally:
        for child in parent.children(recursive=True):
            child.terminate()
        proc.terminate()
        proc.wait(timeout=30)


def _answers(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    except OSError:
        return False


def _worker_of(conn: http.client.HTTPConnection, workers: list[psutil.Process]) -> int | None:
    """The pid of the worker holding this client connection's other end."""
    assert conn.sock is not None
    mine = conn.sock.getsockname()[1]
    for worker in workers:
        if any(c.raddr and c.raddr.port == mine for c in worker.net_connections(kind="tcp")):
            return worker.pid
    return None


def _post(conn: http.client.HTTPConnection, path: str, body: dict[str, Any],
          key: str) -> tuple[int, dict[str, Any]]:
    conn.request("POST", path, json.dumps(body),
                 {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    resp = conn.getresponse()
    return resp.status, json.loads(resp.read())


def _spawned(parent: psutil.Process) -> list[psutil.Process]:
    """uvicorn's workers (not multiprocessing's resource tracker, a child too)."""
    return [c for c in parent.children() if "spawn_main" in " ".join(c.cmdline())]


def _two_workers_spawned(parent: psutil.Process) -> list[psutil.Process]:
    return wait_for(lambda: _spawned(parent) if len(_spawned(parent)) == 2 else None,
                    timeout=60, what="uvicorn's two worker processes")


def _one_connection_per_worker(port: int, workers: list[psutil.Process]
                               ) -> dict[int, http.client.HTTPConnection]:
    """Keep-alive connections until two are served by different workers (the kernel hands each
    new connection to whichever worker accepts first)."""
    by_worker: dict[int, http.client.HTTPConnection] = {}
    for _ in range(40):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/healthz")
        conn.getresponse().read()
        pid = _worker_of(conn, workers)
        if pid is not None and pid not in by_worker:
            by_worker[pid] = conn
        else:
            conn.close()
        if len(by_worker) == 2:
            break
    assert len(by_worker) == 2, f"every connection went to one worker: {list(by_worker)}"
    return by_worker


def _readyz(conn: http.client.HTTPConnection) -> tuple[int, dict[str, Any]]:
    conn.request("GET", "/readyz")
    resp = conn.getresponse()
    return resp.status, json.loads(resp.read())


def _readyz_anew(port: int) -> tuple[int, dict[str, Any]] | None:
    """/readyz on a new connection (a worker that accepts it answers), or None on no answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        return _readyz(conn)
    except OSError:
        return None
    finally:
        conn.close()


def test_readyz_is_what_every_worker_agrees_on(
        two_workers: tuple[int, psutil.Process, dict[str, str]]) -> None:
    """Ready from either worker only while both are; a stopped worker turns the other's
    /readyz red once its heartbeat lapses, naming how many are ready; green again once it
    answers (resumed, or replaced by uvicorn, which kills a worker that stops answering its
    pings)."""
    port, parent, _ = two_workers
    workers = _two_workers_spawned(parent)
    wait_for(lambda: (_readyz_anew(port) or (0, {}))[0] == 200, timeout=60,
             what="both workers ready")
    for pid, conn in _one_connection_per_worker(port, workers).items():
        status, body = _readyz(conn)
        assert status == 200 and body["workers"] == {"ready": 2, "expected": 2}, (pid, body)
        conn.close()

    stopped = workers[0]
    stopped.suspend()
    try:
        def red() -> dict[str, Any] | None:
            answer = _readyz_anew(port)
            return answer[1] if answer and answer[0] == 503 else None

        body = wait_for(red, timeout=60, interval=0.1, what="/readyz red with a worker stopped")
        assert body["code"] == "workers_not_ready" and body["status"] == "unavailable"
        assert body["workers"] == {"ready": 1, "expected": 2}
        assert set(body["dependencies"].values()) == {"ok"}  # the answering worker is fine
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            stopped.resume()
    body = wait_for(lambda: (a := _readyz_anew(port)) and a[0] == 200 and a[1], timeout=120,
                    what="/readyz green again")
    assert body["workers"] == {"ready": 2, "expected": 2}


def test_a_continue_token_of_one_worker_is_honoured_by_another(
        two_workers: tuple[int, psutil.Process, dict[str, str]]) -> None:
    port, parent, keys = two_workers
    workers = _two_workers_spawned(parent)
    by_worker = _one_connection_per_worker(port, workers)
    first, second = by_worker.values()

    status, page = _post(first, "/v1/search", {"query": "acme robotics", "limit": 1}, keys["a"])
    assert status == 200 and page["has_more"], page
    seen = [o["id"] for o in page["objects"]]
    status, more = _post(second, "/v1/continue",
                         {"result_set_id": page["result_set_id"], "limit": 2}, keys["a"])
    assert status == 200, more
    assert [o["id"] for o in more["objects"]] and not set(seen) & {o["id"] for o in
                                                                  more["objects"]}
    # the other tenant cannot use it, on either worker
    for conn in (first, second):
        status, refused = _post(conn, "/v1/continue",
                                {"result_set_id": page["result_set_id"]}, keys["b"])
        assert status == 404 and refused["error"]["code"] == "result_set_not_found", refused
