"""Operations routes, unauthenticated: liveness, readiness (each dependency checked, and every
worker of the instance) and the Prometheus metrics of the process."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError

from api import metrics
from api.dependencies import Svc
from pipeline.domain.setting_values import redact_credentials
from pipeline.lexical.postings_switch import NOT_MAINTAINED
from pipeline.wiring.lexical_follower import REPLICA_BEHIND, REPLICA_BUILDING
from pipeline.wiring.worker_readiness import WorkerReadiness

log = logging.getLogger(__name__)

router = APIRouter(tags=["ops"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "a dependency or a worker is down"}})
async def readyz(request: Request, svc: Svc) -> JSONResponse:
    """Readiness: each dependency "ok" or "down" (503 with code `dependency_unavailable` when one
    is down) and, under `brainstream api`, how many of the instance's API_WORKERS workers are
    ready (503 `workers_not_ready` unless all are: pipeline/wiring/worker_readiness.py). Why a
    dependency is down goes to the log and `brainstream_api_dependency_up`, never to this
    unauthenticated answer, except the fixed texts that name no host: `sql_postings` (an
    API on LEXICAL_ENGINE=postgres over a database that does not keep the SQL postings) and
    `lexical_replica` (this host's lexical replica building itself, or how far it lags).
    With a read standby (POSTGRES_READ_DSN), `postgres_standby` says its state ("ok",
    "lagging", "down"), lag and bound; it never makes the API unready (the primary serves the
    reads the standby cannot)."""
    checks = await svc.check()
    for name, why in checks.items():
        metrics.DEPENDENCY_UP.labels(name).set(0 if why else 1)
        if why:
            log.warning("readiness: %s is down: %s", name, redact_credentials(why))
    ready = not any(checks.values())
    body: dict[str, object] = {
        "status": "ready" if ready else "unavailable",
        "dependencies": {name: "down" if why else "ok" for name, why in checks.items()},
        "generation": svc.settings.generation}
    if not ready:
        body["code"] = "dependency_unavailable"
    tally: WorkerReadiness | None = request.app.state.worker_readiness
    if tally is not None:
        # Redis down: how many workers are ready is unknown, and this worker is not ready
        # either (its continue tokens and shared limits live there: `redis` is down above)
        workers: int | None = None
        try:
            await tally.publish(ready)
            workers = await tally.count()
        except RedisError as exc:
            log.warning("readiness: the workers' tally is unreadable: %s",
                        redact_credentials(f"{type(exc).__name__}: {exc}"))
        body["workers"] = {"ready": workers, "expected": tally.expected}
        if ready and (workers is None or workers < tally.expected):
            ready = False
            body.update(status="unavailable", code="workers_not_ready")
    standby = metrics.standby_view(svc)
    if standby is not None:  # optional capacity: reads go to the primary while it is not "ok"
        body["postgres_standby"] = standby
    reasons: dict[str, str] = {}
    if checks.get("sql_postings") == NOT_MAINTAINED:
        reasons["sql_postings"] = NOT_MAINTAINED
    replica = checks.get("lexical_replica") or ""
    if replica.startswith((REPLICA_BUILDING, REPLICA_BEHIND)):
        reasons["lexical_replica"] = replica  # fixed texts and a lag: no host named
    if reasons:
        body["reasons"] = reasons
    return JSONResponse(status_code=200 if ready else 503, content=body)


@router.get("/metrics", include_in_schema=False)
async def prometheus(svc: Svc) -> Response:
    """The metrics of this process, in the Prometheus text format."""
    metrics.standby_view(svc)
    if svc.ppr_snapshots is not None:
        status = svc.ppr_snapshots.status()
        for measure in ("namespaces", "bytes", "building", "queued", "refused", "builds",
                        "last_build_seconds", "oldest_age_seconds"):
            metrics.PPR_SNAPSHOT.labels(measure).set(status[measure])
    try:
        lag = await svc.lexical_lag()
        metrics.LEXICAL_REPLICA_LAG.set(lag.seconds if lag.built else float("nan"))
    except Exception as exc:  # Postgres down: the gauge keeps its last value
        log.warning("metrics: the lexical replica's lag is unreadable: %s",
                    redact_credentials(f"{type(exc).__name__}: {exc}"))
    return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)
