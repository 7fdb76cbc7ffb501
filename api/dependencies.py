"""What every route depends on: the services of the active index generation, and the bearer key
of a request (what the key may do: `api/access.py`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from pipeline.domain.errors import Unauthorized
from pipeline.postgres.routing import current_route
from pipeline.wiring import Services


def get_services(request: Request) -> Services:
    """The services the app publishes (`app.state.services`, swapped on a generation switch);
    the request's reads are routed by them (`pipeline/postgres/routing.py`)."""
    svc: Services = request.app.state.services
    route = current_route()
    if route is not None:
        route.router = svc.reads
    return svc


def bearer_key(authorization: str | None) -> str:
    """The API key of an `Authorization: Bearer` header (401 when there is none)."""
    if not authorization or not authorization.lower().startswith("bearer "):
        raise Unauthorized("missing bearer API key", field="Authorization")
    return authorization[7:].strip()


Svc = Annotated[Services, Depends(get_services)]
