"""Prometheus metrics of the API process."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

REGISTRY = CollectorRegistry()

REQUEST_SECONDS = Histogram(
    "brainstream_api_request_seconds", "API request latency by route, method and status",
    ["route", "method", "status"], registry=REGISTRY,
    buckets=(0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0))
DEGRADED = Counter(
    "brainstream_api_degraded_total", "Answers given in a degraded mode, by endpoint and mode",
    ["endpoint", "mode"], registry=REGISTRY)
