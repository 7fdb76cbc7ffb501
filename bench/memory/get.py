"""GET /v1/sessions/{id}/memory latency on the 10,000-message session, through the API app, with
baselines timed in the same loop: GET /healthz (the app and the client, no database) and
GET /v1/sessions/{id} (one small statement on the same pool). The requests are interleaved
round-robin so a busy moment of the shared machine lands on every route alike; the ratios
against the baselines are the figures that survive the load.

A second app runs the read pool with psycopg_pool's own check (an empty query on every
checkout, what the pool did before `check_idle_connection`), interleaved too: the before/after
of the round trip it saves, in the same run.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from psycopg_pool import AsyncConnectionPool

import pipeline.postgres.pool as pool_module
from bench.harness.timing import percentile
from pipeline.settings import Settings

WARMUP = 20


@contextmanager
def _query_check() -> Iterator[None]:
    """Pools made inside check every connection with a round trip (the previous behaviour)."""
    saved = pool_module.check_idle_connection
    pool_module.check_idle_connection = AsyncConnectionPool.check_connection  # type: ignore[assignment]
    try:
        yield
    finally:
        pool_module.check_idle_connection = saved


def get_memory_ms(settings: Settings, ns: uuid.UUID, sid: str, rounds: int = 300
                  ) -> dict[str, float]:
    """p50 and p95 (ms) per route; keys "<label> p50" / "<label> p95"."""
    from fastapi.testclient import TestClient

    from api.app import create_app

    key = f"bench-{uuid.uuid4().hex}"
    app_settings = settings.model_copy(update={"api_keys": {key: [str(ns)]}})
    headers = {"Authorization": f"Bearer {key}"}
    memory = f"/v1/sessions/{sid}/memory"
    with ExitStack() as stack:
        client = stack.enter_context(TestClient(create_app(app_settings)))
        with _query_check():
            before = stack.enter_context(TestClient(create_app(app_settings)))
        calls: dict[str, tuple[Any, str, dict[str, Any]]] = {
            "healthz": (client, "/healthz", {}),
            "session": (client, f"/v1/sessions/{sid}", {}),
            "window": (client, memory, {}),
            "lastn=50": (client, memory, {"lastn": 50}),
            "window, query check": (before, memory, {}),
        }
        times: dict[str, list[float]] = {label: [] for label in calls}
        for i in range(rounds + WARMUP):
            for label, (http, path, params) in calls.items():
                start = time.perf_counter()
                res = http.get(path, params=params, headers=headers)
                elapsed = (time.perf_counter() - start) * 1000
                if res.status_code != 200:
                    raise RuntimeError(f"GET {path} answered {res.status_code}: {res.text}")
                if i >= WARMUP:  # warm-up: connections, caches
                    times[label].append(elapsed)
    out: dict[str, float] = {}
    for label, values in times.items():
        out[f"{label} p50"] = percentile(values, 50)
        out[f"{label} p95"] = percentile(values, 95)
    return out
