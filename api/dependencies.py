"""What every route depends on: the caller's namespace (from its API key) and the services of
the active index generation."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Depends, Header, Request

from pipeline.domain.errors import InvalidInput, NamespaceForbidden, Unauthorized
from pipeline.settings import Settings
from pipeline.wiring import Services


def get_services(request: Request) -> Services:
    """The services the app publishes (`app.state.services`, swapped on a generation switch)."""
    svc: Services = request.app.state.services
    return svc


def bearer_key(authorization: str | None) -> str:
    """The API key of an `Authorization: Bearer` header (401 when there is none)."""
    if not authorization or not authorization.lower().startswith("bearer "):
        raise Unauthorized("missing bearer API key", field="Authorization")
    return authorization[7:].strip()


def known_key(settings: Settings, key: str) -> bool:
    """Whether `key` is a configured API key of any kind (the one place that says so: the
    ASGI layer refuses the others before reading a body)."""
    return key in settings.api_keys or key in settings.api_admin_keys


def namespace(request: Request, authorization: Annotated[str | None, Header()] = None,
              x_namespace: Annotated[str | None, Header()] = None) -> uuid.UUID:
    """The caller's namespace, from its API key (and X-Namespace when it has several)."""
    settings: Settings = request.app.state.settings
    namespaces = settings.api_keys.get(bearer_key(authorization))
    if not namespaces:
        raise Unauthorized("unknown API key", field="Authorization")
    if x_namespace is None:
        if len(namespaces) != 1:
            raise InvalidInput("this key has several namespaces: name one with X-Namespace",
                               field="X-Namespace")
        chosen = namespaces[0]
    elif x_namespace in namespaces:
        chosen = x_namespace
    else:
        raise NamespaceForbidden("the key is not bound to that namespace", field="X-Namespace")
    try:
        return uuid.UUID(chosen)
    except ValueError as exc:
        raise Unauthorized("the key's namespace is not a UUID") from exc


Ns = Annotated[uuid.UUID, Depends(namespace)]
Svc = Annotated[Services, Depends(get_services)]
