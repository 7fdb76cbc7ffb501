"""Prometheus metrics of the API process, and the middleware that times every request."""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable

from fastapi import Request, Response
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from pipeline.wiring import Services

REGISTRY = CollectorRegistry()

REQUEST_SECONDS = Histogram(
    "brainstream_api_request_seconds", "API request latency by route, method and status",
    ["route", "method", "status"], registry=REGISTRY,
    buckets=(0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0))
DEGRADED = Counter(
    "brainstream_api_degraded_total", "Answers given in a degraded mode, by endpoint and mode",
    ["endpoint", "mode"], registry=REGISTRY)

DEPENDENCY_UP = Gauge(
    "brainstream_api_dependency_up", "Whether a dependency answered the last readiness check "
    "(1) or not (0); the reason is in the API's log", ["dependency"], registry=REGISTRY)

REPLICA_LAG = Gauge(
    "brainstream_postgres_replica_lag_seconds", "Seconds the read standby (POSTGRES_READ_DSN) "
    "is behind the primary, as this process last measured it (NaN while it is down)",
    registry=REGISTRY)
REPLICA_UP = Gauge(
    "brainstream_postgres_replica_up", "Whether the read standby answered this process's last "
    "probe as a standby (1) or not (0)", registry=REGISTRY)

LEXICAL_REPLICA_LAG = Gauge(
    "brainstream_lexical_replica_lag_seconds", "How long the oldest change this host's lexical "
    "replica of the active generation has not applied has waited (0: current; NaN: still "
    "building itself from Postgres)", registry=REGISTRY)

PPR_SNAPSHOT = Gauge(
    "brainstream_ppr_snapshot", "This process's in-memory PPR snapshots: namespaces held, "
    "bytes held (estimated), builds running (0 or 1) and queued, namespaces refused (over "
    "PPR_SNAPSHOT_MAX_BYTES), builds so far, seconds of the last build, seconds since the "
    "stalest snapshot's last refresh read", ["measure"], registry=REGISTRY)


def standby_view(svc: Services) -> dict[str, object] | None:
    """The read standby as this process sees it (None without one), with its gauges set: its
    state ("ok", "lagging" past POSTGRES_READ_MAX_LAG, or "down"), lag and bound."""
    state = svc.reads.state()
    if state is None:
        return None
    REPLICA_UP.set(1 if state.up else 0)
    REPLICA_LAG.set(state.lag_seconds if state.lag_seconds is not None else math.nan)
    max_lag = svc.settings.postgres_read_max_lag
    lag = None if state.lag_seconds is None else round(state.lag_seconds, 3)
    return {"state": state.describe(max_lag), "lag_seconds": lag, "max_lag_seconds": max_lag}


async def observe(request: Request,
                  call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """HTTP middleware: the request's latency, by route template, method and status."""
    started = time.perf_counter()
    response = await call_next(request)
    route = request.scope.get("route")
    path = getattr(route, "path", "unmatched")
    REQUEST_SECONDS.labels(path, request.method, str(response.status_code)) \
        .observe(time.perf_counter() - started)
    return response
