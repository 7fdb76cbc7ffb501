"""The web explorer on the real stack: two tenants holding the shared examples (and a note
linked to the deal, so a graph has a node to expand and a path two hops), a session's messages,
one poison event (a dead letter with its reason), `brainstream api` as its own process, and a
headless chromium (Debian's, driven by its chromedriver) pointed at it."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import uuid
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest

from pipeline.settings import Settings
from tests.apiutil import ApiTenant
from tests.memory.memutil import add, message, send
from tests.pipelineutil import Proc, Publisher, envelope, indexed, put, wait_for
from tests.stackutil import EXAMPLES, settings_env

CHROMIUM = Path("/usr/bin/chromium")
# The API reaches Postgres by a DSN that carries this password (the embedded server trusts
# local connections and ignores it), as compose's does: it must never be answered or shown.
DSN_PASSWORD = "ui-dsn-secret-7Qx"
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SESSION = "ui-kickoff"
# The examples' object ids, by what they are (the note is soft-deleted by the examples).
EXAMPLE_IDS = {"company": "0b9d7c7e-1111-4a2b-8c3d-000000000001",
               "deal": "0b9d7c7e-1111-4a2b-8c3d-000000000002",
               "note": "0b9d7c7e-1111-4a2b-8c3d-000000000003"}


@dataclass
class UiTenant(ApiTenant):
    """A tenant of the explorer's tests: its objects by name, and the event id of its poison
    event (dead-lettered `unknown_kind`)."""

    ids: dict[str, str] = field(default_factory=dict)
    poison_event: str = ""


@dataclass
class Explorer:
    """The running API: its base URL, the tenants, a key bound to both, an admin key."""

    url: str
    tenants: dict[str, UiTenant]
    both_key: str
    admin_key: str
    env: dict[str, str] = field(default_factory=dict)  # the API's: its DSN has a password
    curator_key: str = ""  # admin on tenant a's namespace: decides its possibly-same pairs
    log: Path | None = None  # the API process's output

    def get(self, key: str, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.get(self.url + path, headers={"Authorization": f"Bearer {key}"},
                         timeout=60, **kwargs)

    def post(self, key: str, path: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(self.url + path, json=body,
                          headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _examples(ns: uuid.UUID, ids: dict[str, str]) -> list[tuple[bytes, str]]:
    """The shared examples re-addressed to `ns` with fresh object and event ids (ids are
    global: two tenants cannot hold the same ones), keyed as a publisher keys them."""
    out = []
    for line in (EXAMPLES / "events.jsonl").read_text().splitlines():
        for name, example_id in EXAMPLE_IDS.items():
            line = line.replace(example_id, ids[name])
        event = json.loads(line)
        event.update(namespace=str(ns), id=str(uuid.uuid4()))
        data = event["data"]
        out.append((json.dumps(event).encode(), data.get("id") or data["from"]))
    return out


def _publish_tenant(pub: Publisher, ns: uuid.UUID, *, only_b: bool) -> UiTenant:
    ids = {name: str(uuid.uuid4()) for name in (*EXAMPLE_IDS, "visit")}
    pub.send_all(_examples(ns, ids))
    visit = put(ns, id=ids["visit"], kind="note", title="Rotterdam site visit",
                content="Walked the Rotterdam warehouse with Acme's operations lead.\n\n"
                        "The robot arms fit the picking aisles; power needs an upgrade.",
                properties={"author": "sam"})
    link = envelope("link.put", ns, {"from": ids["visit"], "to": ids["deal"],
                                     "relation_type": "about",
                                     "meta": {"note": "site visit for the rollout"}})
    pub.send_all([(json.dumps(visit).encode(), ids["visit"]),
                  (json.dumps(link).encode(), ids["visit"])])
    if only_b:
        ids["only_b"] = str(uuid.uuid4())
        secret = put(ns, id=ids["only_b"], kind="company", title="Bravo Secret Robotics",
                     summary="Robot arms for warehouses, a tenant B customer.")
        pub.send(secret, ids["only_b"])
    poison = put(ns, kind="no_such_kind", title="poison for the operator page")
    pub.send(poison, poison["data"]["id"])
    send(pub, ns, SESSION,
         add(ns, SESSION, message("When does the Rotterdam pilot start?"),
             message("After the security review; the SOC 2 report goes out Monday.",
                     role="assistant")))
    return UiTenant(ns, f"ui-key-{'b' if only_b else 'a'}-{uuid.uuid4().hex[:8]}", ids,
                    poison["id"])


def _with_password(dsn: str) -> str:
    """`dsn` (a URL) with DSN_PASSWORD as its user's password."""
    parts = urlsplit(dsn)
    user = parts.username or "postgres"
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:{DSN_PASSWORD}@{host}"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    except OSError:
        return False


def _extraction_settled(settings: Settings, ns: uuid.UUID) -> bool:
    """No row of the namespace waits for its extraction or its entities' recount."""
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM entity_extraction WHERE namespace_id = %s"
                           " AND (status = 'pending' OR recount)", (ns,)).fetchone()
    return bool(row) and row[0] == 0


@pytest.fixture(scope="session")
def explorer(procs: dict[str, Proc], catalog: Settings) -> Iterator[Explorer]:
    """Both tenants' data applied by the running pipeline, and `brainstream api` (one worker:
    the tests read what one process answers) with their read keys, a read key of both, an
    operator key."""
    pub = Publisher(catalog)
    try:
        tenants = {name: _publish_tenant(pub, uuid.uuid4(), only_b=name == "b")
                   for name in ("a", "b")}
    finally:
        pub.close()
    for tenant in tenants.values():
        for name in ("company", "deal", "visit", *(["only_b"] if "only_b" in tenant.ids else [])):
            wait_for(lambda oid=tenant.ids[name]: indexed(catalog, oid), timeout=120,
                     what=f"{name} indexed")
    both_key, admin_key = f"ui-both-{uuid.uuid4().hex[:8]}", f"ui-admin-{uuid.uuid4().hex[:8]}"
    keys: dict[str, object] = {t.key: [str(t.namespace)] for t in tenants.values()}
    keys[both_key] = [str(tenants["a"].namespace), str(tenants["b"].namespace)]
    keys[admin_key] = {"name": "ui-operator", "operator": True}
    curator_key = f"ui-curator-{uuid.uuid4().hex[:8]}"
    keys[curator_key] = {"name": "ui-curator",
                         "scopes": {str(tenants["a"].namespace): ["admin"]}}
    port = _free_port()
    env = {**settings_env(catalog), "BRAINSTREAM_API_WORKERS": "1",
           "BRAINSTREAM_API_PORT": str(port), "BRAINSTREAM_API_KEYS": json.dumps(keys),
           "BRAINSTREAM_POSTGRES_DSN": _with_password(catalog.base_postgres_dsn),
           # the whole suite's dead letters precede this one's: list them all
           "BRAINSTREAM_UI_DEAD_LETTERS_MAX": "10000"}
    log = open(catalog.resolved_data_dir / "ui-api.log", "ab")  # noqa: SIM115 - child owns it
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "api"], env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: _answers(port), timeout=120, what="the API to serve")
        found = Explorer(f"http://127.0.0.1:{port}", tenants, both_key, admin_key, env,
                         curator_key, catalog.resolved_data_dir / "ui-api.log")
        for tenant in tenants.values():  # the links are in the graph, the messages stored
            wait_for(lambda t=tenant: len(found.post(t.key, "/v1/expand", {
                "object_id": t.ids["deal"], "want_containment": False}).json()["objects"]) == 2,
                timeout=120, what="the deal's two links in the graph")
            wait_for(lambda t=tenant: found.get(t.key, f"/v1/sessions/{SESSION}/memory")
                     .status_code == 200, timeout=120, what="the session's messages")
            wait_for(lambda t=tenant: found.get(t.key, f"/v1/objects/{t.ids['visit']}")
                     .json()["entities"], timeout=120, what="the visit's entities extracted")
            # every row extracted and recounted: an entity page's counts stay what they are
            wait_for(lambda t=tenant: _extraction_settled(catalog, t.namespace), timeout=120,
                     what="the tenant's entity extraction settled")
        yield found
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """A failed test of the explorer reports the API process's tracebacks (its log is lost
    with the run's data directory, and a 500 says nothing more)."""
    outcome = yield
    report = outcome.get_result()
    explorer = getattr(item, "funcargs", {}).get("explorer")
    if not report.failed or not isinstance(explorer, Explorer) or explorer.log is None:
        return
    lines = explorer.log.read_text(errors="replace").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(("Traceback", "ERROR"))]
    if starts:
        report.sections.append(("the API's last errors", "\n".join(lines[starts[-1]:][:120])))


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless chromium through Debian's chromedriver (`make install` installs both)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert CHROMEDRIVER.exists(), "chromium-driver is missing: run `make install-browser`"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    # the console, to see each Content-Security-Policy refusal (tests/ui/test_explorer.py)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1100,760", "--hide-scrollbars"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()
