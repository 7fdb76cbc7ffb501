"""The read API under faults: kill -9 under load, and Postgres and FalkorDB restarted under it.

A real `brainstream api` process serves a namespace written by the real write path while a
client thread keeps calling it. A killed API answers again once restarted; a restarted Postgres
or FalkorDB is survived without restarting the API: `/readyz` goes red then green, and while a
dependency is down requests fail fast with a JSON 503 `unavailable` (or answer degraded), never
hang and never answer 500.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from pipeline.services.postgres import PostgresService
from pipeline.services.redis import FalkorDBService
from pipeline.settings import Settings
from tests.faults.faultutil import link, long_content
from tests.pipelineutil import ingest, put, wait_for
from tests.stackutil import REPO, settings_env

pytestmark = [pytest.mark.stack, pytest.mark.slow]
log = logging.getLogger(__name__)

TIMEOUT = 15.0  # a request slower than this counts as a hang
KEY = "fault-api-key"


def _port(settings: Settings) -> int:
    return settings.pg_port - 4298  # beside the test processes' metrics ports


@dataclass
class Api:
    """One `brainstream api` process and a client for it."""

    settings: Settings
    namespace: uuid.UUID
    popen: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{_port(self.settings)}"

    def start(self) -> None:
        env = {**settings_env(self.settings),
               "BRAINSTREAM_API_KEYS": json.dumps({KEY: [str(self.namespace)]}),
               "PYTHONUNBUFFERED": "1",
               # one process: /readyz then speaks for the process the load reaches (with two,
               # each recovers its pool on its own, and a green readyz from one says nothing
               # of the other)
               "BRAINSTREAM_API_WORKERS": "1"}
        log_path = self.settings.resolved_data_dir / "fault-logs" / "api.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as out:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "pipeline.cli", "api", "--port",
                 str(_port(self.settings))], env=env, cwd=str(REPO), stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: self.get("/readyz").status_code == 200, timeout=60,
                 what="the API to be ready")

    def kill9(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=30)

    def get(self, path: str) -> httpx.Response:
        try:
            return httpx.get(self.url + path, timeout=TIMEOUT)
        except httpx.TransportError:
            return httpx.Response(599)


@dataclass
class Load:
    """A client calling every kind of endpoint in a loop; records what it saw."""

    api: Api
    ids: list[str]
    seen: Counter[tuple[str, int, str]] = field(default_factory=Counter)
    bad: list[str] = field(default_factory=list)
    slowest: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def calls(self, rng: random.Random) -> tuple[str, str, dict[str, Any] | None]:
        oid = rng.choice(self.ids)
        return rng.choice([
            ("search", "/v1/search", {"query": "lorem harbour"}),
            ("find_exact", "/v1/find_exact", {"query": "api fault 3"}),
            ("read", f"/v1/objects/{oid}", None),
            ("children", f"/v1/objects/{oid}/children", None),
            ("expand", "/v1/expand", {"object_id": oid, "max_hops": 2}),
            ("find_objects", "/v1/find_objects", {"query": "api fault"}),
            ("find_links", "/v1/find_links", {"relation_type": "partner", "query": "partners"}),
        ])

    def run(self) -> None:
        rng = random.Random(7)
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=self.api.url, timeout=TIMEOUT, headers=headers) as client:
            while not self.stop.is_set():
                name, path, body = self.calls(rng)
                started = time.monotonic()
                try:
                    resp = client.post(path, json=body) if body is not None \
                        else client.get(path)
                except httpx.TimeoutException:
                    self.bad.append(f"{name}: no answer within {TIMEOUT:.0f}s (hang)")
                    continue
                except httpx.TransportError:
                    self.seen[(name, 599, "connection")] += 1  # the API process is down
                    time.sleep(0.05)
                    continue
                self.slowest = max(self.slowest, time.monotonic() - started)
                self.seen[(name, resp.status_code, _code(resp))] += 1
                problem = _problem(resp)
                if problem:
                    self.bad.append(f"{name}: {problem}")
                time.sleep(0.01)

    def __enter__(self) -> Load:
        self._thread = threading.Thread(target=self.run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        assert self._thread is not None
        self._thread.join(timeout=TIMEOUT + 5)

    def mark(self) -> Counter[tuple[str, int, str]]:
        return Counter(self.seen)

    def since(self, mark: Counter[tuple[str, int, str]]) -> Counter[tuple[str, int, str]]:
        return self.seen - mark


def _code(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return "not-json"
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("code"))
    if isinstance(body, dict) and body.get("degrade"):
        return f"degrade:{body['degrade']}"
    return "ok"


def _problem(resp: httpx.Response) -> str | None:
    """What is wrong with an answer, if anything: a 500, HTML, a 503 that is not `unavailable`."""
    if not resp.headers.get("content-type", "").startswith("application/json"):
        return f"HTTP {resp.status_code} with {resp.headers.get('content-type')}: " \
               f"{resp.text[:200]!r}"
    if resp.status_code >= 500 and not (resp.status_code == 503
                                        and _code(resp) == "unavailable"):
        return f"HTTP {resp.status_code}: {resp.text[:300]}"
    if resp.status_code not in (200, 503):
        return f"HTTP {resp.status_code}: {resp.text[:300]}"
    return None


@pytest.fixture(scope="module")
def api(fault_catalog: Settings) -> Iterator[tuple[Api, list[str]]]:
    ns = uuid.uuid4()
    events = [put(ns, kind="company", title=f"api fault {i}",
                  content=long_content(f"harbour{i}", paragraphs=2) if i % 2 == 0 else None)
              for i in range(24)]
    ids = [e["data"]["id"] for e in events]
    events += [link(ns, ids[i], ids[(i + 1) % len(ids)], "partner", f"partners {i}")
               for i in range(len(ids))]
    ingest(fault_catalog, events)
    server = Api(fault_catalog, ns)
    server.start()
    try:
        yield server, ids
    finally:
        server.kill9()


def _ready_checks(server: Api) -> tuple[int, dict[str, str]]:
    resp = server.get("/readyz")
    return resp.status_code, (resp.json().get("dependencies", {}) if resp.status_code != 599
                              else {})


def test_api_kill9_under_load_answers_again_after_restart(api: tuple[Api, list[str]]) -> None:
    server, ids = api
    with Load(server, ids) as load:
        time.sleep(random.uniform(1.0, 3.0))  # a random moment under load
        before = load.mark()
        server.kill9()
        time.sleep(0.5)
        assert server.get("/healthz").status_code == 599, "the API still answers after kill -9"
        server.start()
        restarted = load.mark()
        time.sleep(2.0)
        after = load.since(restarted)
    assert sum(n for (_, status, _), n in before.items() if status == 200) > 0
    assert sum(n for (_, status, _), n in after.items() if status == 200) > 10, after
    assert not [k for k in after if k[1] != 200], f"after the restart: {after}"
    assert not load.bad, load.bad[:5]
    log.info("api kill -9: slowest answer %.2fs; after restart %s", load.slowest, dict(after))


def test_api_survives_postgres_and_falkordb_restarts(api: tuple[Api, list[str]]) -> None:
    server, ids = api
    settings = server.settings
    postgres, falkordb = PostgresService(settings), FalkorDBService(settings)
    with Load(server, ids) as load:
        time.sleep(1.0)
        mark = load.mark()
        try:
            assert postgres.stop()
            _, checks = wait_for(lambda: (r := _ready_checks(server))[0] == 503 and r,
                                      timeout=TIMEOUT, what="readyz to report Postgres down")
            assert checks["postgres"] == "down", checks
            time.sleep(3.0)  # requests keep arriving while Postgres is down
        finally:
            postgres.start()
        wait_for(lambda: _ready_checks(server)[0] == 200, timeout=30,
                 what="readyz green again after Postgres came back")
        during_pg = load.since(mark)
        time.sleep(1.5)
        mark = load.mark()
        time.sleep(1.5)
        after_pg = load.since(mark)
        try:
            assert falkordb.stop()
            _, checks = wait_for(lambda: (r := _ready_checks(server))[0] == 503 and r,
                                      timeout=TIMEOUT, what="readyz to report FalkorDB down")
            assert checks["falkordb"] == "down" and checks["postgres"] == "ok", checks
            mark = load.mark()
            time.sleep(3.0)
            during_graph = load.since(mark)
        finally:
            falkordb.start()  # waits until its indexes are OPERATIONAL again
        wait_for(lambda: _ready_checks(server)[0] == 200, timeout=30,
                 what="readyz green again after FalkorDB came back")
        time.sleep(1.5)
        mark = load.mark()
        time.sleep(1.5)
        after_graph = load.since(mark)
    log.info("api outages: during postgres %s; after %s; during graph %s; after %s; "
             "slowest %.2fs", dict(during_pg), dict(after_pg), dict(during_graph),
             dict(after_graph), load.slowest)
    assert not load.bad, f"{len(load.bad)} bad answers, e.g. {load.bad[:5]}"
    assert any(status == 503 and code == "unavailable" for _, status, code in during_pg), \
        f"no request saw Postgres down: {during_pg}"
    assert all(status == 200 for _, status, _ in after_pg) and after_pg, after_pg
    # The graph down: Postgres-only endpoints answer, expand and find_objects degrade, and
    # find_links (edge notes live only in the graph) fails fast with a 503 `unavailable`.
    assert during_graph and all(status == 200 or (name, code) == ("find_links", "unavailable")
                                for name, status, code in during_graph), during_graph
    assert any(code == "degrade:graph_unavailable" for _, _, code in during_graph), during_graph
    assert all(status == 200 and code != "degrade:graph_unavailable"
               for _, status, code in after_graph) and after_graph, after_graph
