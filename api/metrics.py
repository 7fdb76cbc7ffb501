"""Prometheus metrics of the API process, and the middleware that times every request."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from fastapi import Request, Response
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

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

LEXICAL_REPLICA_LAG = Gauge(
    "brainstream_lexical_replica_lag_seconds", "How long the oldest change this host's lexical "
    "replica of the active generation has not applied has waited (0: current; NaN: still "
    "building itself from Postgres)", registry=REGISTRY)

PPR_SNAPSHOT = Gauge(
    "brainstream_ppr_snapshot", "This process's in-memory PPR snapshots: namespaces held, "
    "bytes held (estimated), builds running (0 or 1) and queued, namespaces refused (over "
    "PPR_SNAPSHOT_MAX_BYTES), builds so far, seconds of the last build, seconds since the "
    "stalest snapshot's last refresh read", ["measure"], registry=REGISTRY)


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
