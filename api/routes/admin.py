"""Operations routes, unauthenticated: liveness, readiness (each dependency checked) and the
Prometheus metrics of the process."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api import metrics
from api.dependencies import Svc

router = APIRouter(tags=["ops"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "a dependency is down"}})
async def readyz(svc: Svc) -> JSONResponse:
    """Readiness: each dependency answers (503 with details otherwise)."""
    checks = await svc.check()
    ready = all(v == "ok" for v in checks.values())
    return JSONResponse(status_code=200 if ready else 503,
                        content={"status": "ready" if ready else "degraded",
                                 "checks": checks,
                                 "generation": svc.settings.generation})


@router.get("/metrics", include_in_schema=False)
async def prometheus() -> Response:
    """The metrics of this process, in the Prometheus text format."""
    return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)
