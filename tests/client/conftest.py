"""The client against the real API: `brainstream api` run as its own process (one worker: the
per-key limits are per process) over the session's stack, with the pipeline's processes
running (`procs`), and two tenants whose data the project's test `Publisher` sends through the
broker like any producer. Tenant A's key (named alice) also curates entities (admin); B's
writes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from pipeline.settings import Settings
from tests.pipelineutil import Proc, Publisher, envelope, indexed, pipeline_env, put, wait_for

PAGED = 23  # objects of the paged kind per tenant: three pages of ten
NOTE = ("# Kickoff\n\nAcme Robotics wants the pilot in Rotterdam first.\n\n"
        "Budget owner is Dana Whitfield; procurement needs a security review before "
        "signature.\n\nNext step: send Dana Whitfield the SOC 2 report.")


@dataclass
class LiveTenant:
    """A tenant of the live API: its namespace, key and the ids of its objects by name."""

    namespace: uuid.UUID
    key: str
    ids: dict[str, str] = field(default_factory=dict)
    paged: list[str] = field(default_factory=list)


@dataclass
class LiveApi:
    url: str
    tenants: dict[str, LiveTenant]


def _events(tenant: LiveTenant) -> list[dict[str, Any]]:
    ns, ids = tenant.namespace, tenant.ids
    events = [
        put(ns, id=ids["company"], kind="company", title="Acme Robotics",
            summary="Industrial robot arms for warehouses.",
            properties={"industry": "robotics", "public": False}),
        put(ns, id=ids["deal"], kind="deal", title="Acme warehouse rollout",
            summary="Forty arms across three sites.",
            properties={"stage": "prospect", "amount": 420000}),
        put(ns, id=ids["note"], kind="note", title="Kickoff call with Acme Robotics",
            content=NOTE, content_type="text/markdown", properties={"author": "jordan"}),
        envelope("link.put", ns, {"from": ids["deal"], "to": ids["company"],
                                  "relation_type": "buyer",
                                  "meta": {"note": "Acme is the buying entity"}}),
        envelope("link.put", ns, {"from": ids["note"], "to": ids["deal"],
                                  "relation_type": "about",
                                  "meta": {"note": "kickoff notes for the rollout deal"}}),
    ]
    events += [put(ns, id=oid, kind="company", title=f"Quillwort supplier {i}",
                   summary="Quillwort gaskets and seals.") for i, oid in enumerate(tenant.paged)]
    return events


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serving(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="session")
def live_api(catalog: Settings, procs: dict[str, Proc]) -> Iterator[LiveApi]:
    """The API process, and both tenants' data indexed by the running pipeline."""
    tenants = {}
    for name in ("a", "b"):
        tenant = LiveTenant(uuid.uuid4(), f"client-{name}-{uuid.uuid4().hex[:8]}",
                            {k: str(uuid.uuid4()) for k in ("company", "deal", "note")},
                            [str(uuid.uuid4()) for _ in range(PAGED)])
        tenants[name] = tenant
    publisher = Publisher(catalog)
    try:
        for tenant in tenants.values():
            for event in _events(tenant):
                publisher.send(event, event["data"].get("id") or event["data"]["from"])
    finally:
        publisher.close()
    port = _free_port()
    env = pipeline_env(catalog, BRAINSTREAM_API_WORKERS="1", BRAINSTREAM_API_PORT=str(port),
                       BRAINSTREAM_MEMORY_WRITE_WAIT="20",
                       BRAINSTREAM_API_KEYS=json.dumps({t.key: {
                           "name": "alice" if n == "a" else f"client-{n}",
                           "scopes": {str(t.namespace): ["admin" if n == "a" else "write"]}}
                           for n, t in tenants.items()}))
    log_dir = catalog.resolved_data_dir / "proc-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / "client-api.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "api"], env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _serving(url), timeout=120, what="the API to serve")
        for tenant in tenants.values():
            for oid in [*tenant.ids.values(), *tenant.paged]:
                wait_for(lambda oid=oid: indexed(catalog, oid), timeout=120,
                         what=f"object {oid} to be indexed")
        yield LiveApi(url, tenants)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
