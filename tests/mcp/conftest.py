"""Issue 15 item 1: `POST /v1/events` and the MCP server, on the real stack with the pipeline
running (`procs`), two tenants everywhere. The events tests call the API in-process; the MCP
tests run `brainstream api` as a process (the MCP server reaches it over HTTP) and spawn
`brainstream mcp` or run it over streamable HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from fastapi.testclient import TestClient

from api.routes import events as events_route
from pipeline.settings import Settings
from tests.apiprocess import free_port, serve_api
from tests.apiutil import ApiTenant, api_client, api_keys
from tests.pipelineutil import Proc, wait_for
from tests.stackutil import REPO, settings_env

# What one POST /v1/events may carry: a test passes it by one event.
EVENTS_MAX = events_route.EVENTS_MAX


@dataclass
class RunningApi:
    """A `brainstream api` process: its base URL and its environment (keys included)."""

    url: str
    env: dict[str, str]


def in_ledger(settings: Settings, namespace: uuid.UUID, event_id: str) -> bool:
    """Whether the consumer has applied an event (the processed-event ledger holds it)."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute("SELECT 1 FROM processed_events WHERE namespace_id = %s"
                           " AND event_id = %s", (namespace, event_id)).fetchone()
    return row is not None


@pytest.fixture(scope="session")
def ev_tenants() -> dict[str, ApiTenant]:
    return {name: ApiTenant(uuid.uuid4(), f"ev-{name}-{uuid.uuid4().hex[:8]}")
            for name in ("a", "b")}


@pytest.fixture(scope="session")
def ev_client(catalog: Settings, procs: dict[str, Proc],
              ev_tenants: dict[str, ApiTenant]) -> Iterator[TestClient]:
    """The API in-process over the running pipeline, a key per tenant."""
    with api_client(catalog, ev_tenants.values(), "write", memory_write_wait=20.0) as client:
        yield client


@pytest.fixture(scope="session")
def api_process(catalog: Settings, procs: dict[str, Proc],
                ev_tenants: dict[str, ApiTenant]) -> Iterator[RunningApi]:
    """`brainstream api` (one worker) over the running pipeline, a key per tenant."""
    env = {**settings_env(catalog), "HF_HUB_OFFLINE": "1",
           "BRAINSTREAM_API_KEYS": json.dumps(api_keys(ev_tenants.values(), "write")),
           "BRAINSTREAM_API_WORKERS": "1", "BRAINSTREAM_MEMORY_WRITE_WAIT": "20"}
    with serve_api(env, catalog.resolved_data_dir / "mcp-logs" / "api.log") as running:
        yield RunningApi(running.url, env)


def mcp_env(api: RunningApi, **extra: str) -> dict[str, str]:
    """The environment of `brainstream mcp` in front of `api`: its URL, and no API keys (the
    MCP server learns from the API whether a key is valid, it never needs the keys)."""
    env = {k: v for k, v in api.env.items()
           if k != "BRAINSTREAM_API_KEYS"}
    return {**env, "BRAINSTREAM_MCP_API_URL": api.url, **extra}


@contextmanager
def mcp_http_server(env: dict[str, str], *flags: str) -> Iterator[str]:
    """`brainstream mcp --transport http` (with `flags`) while the block runs: its endpoint URL.
    Its log goes to the temporary directory (brainstream-mcp-<port>.log)."""
    port = free_port()
    log_path = Path(tempfile.gettempdir()) / f"brainstream-mcp-{port}.log"
    with open(log_path, "ab") as out:
        popen = subprocess.Popen(
            [sys.executable, "-m", "pipeline.cli", "mcp", "--transport", "http", "--port",
             str(port), *flags], env=env, cwd=str(REPO), stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_for(lambda: _listening(url), timeout=60, what="the MCP server to listen")
        yield url
    finally:
        os.killpg(popen.pid, signal.SIGTERM)
        popen.wait(timeout=30)


def _listening(url: str) -> bool:
    try:
        httpx.get(url, timeout=2)
        return True
    except httpx.TransportError:
        return False
