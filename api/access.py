"""Who the caller is and what its key may do: the dependencies every `/v1` route declares.

`Caller` is the key's record (401 for a missing or unknown key); `ReadNs`, `WriteNs` and
`AdminNs` are the namespace a request acts in (X-Namespace names one of a key bound to several)
once the key holds that scope on it (403 `scope_required` otherwise); `Operator` is a key with
`operator: true`. A unit test walks the routes: every `/v1` route declares one of them
(`SCOPE_OF`), so a new route cannot forget.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Header, Request

from api.dependencies import bearer_key
from pipeline.access import ApiKey, Scope, parse_api_keys
from pipeline.domain.errors import (
    InvalidInput,
    NamespaceForbidden,
    OperatorRequired,
    ScopeRequired,
    Unauthorized,
)
from pipeline.postgres.routing import current_route
from pipeline.settings import Settings


def key_table(settings: Settings) -> dict[str, ApiKey]:
    """The API's keys (secret -> record), as `create_app` keeps them: settings copied in code
    (`model_copy`, which validates nothing) are parsed like the environment's."""
    return parse_api_keys(settings.api_keys)


def caller(request: Request, authorization: Annotated[str | None, Header()] = None) -> ApiKey:
    """The record of the caller's key (401 when it has none or an unknown one)."""
    keys: dict[str, ApiKey] = request.app.state.api_keys
    key = keys.get(bearer_key(authorization))
    if key is None:
        raise Unauthorized("unknown API key", field="Authorization")
    return key


Caller = Annotated[ApiKey, Depends(caller)]


def chosen_namespace(key: ApiKey, x_namespace: str | None) -> uuid.UUID:
    """The namespace a request acts in: the key's only one, or the one X-Namespace names."""
    namespaces = key.namespaces
    if not namespaces:
        raise NamespaceForbidden("the key is bound to no namespace", field="Authorization")
    if x_namespace is None:
        if len(namespaces) != 1:
            raise InvalidInput("this key has several namespaces: name one with X-Namespace",
                               field="X-Namespace")
        return namespaces[0]
    try:
        named = uuid.UUID(x_namespace)
    except ValueError:
        named = None
    if named is None or named not in namespaces:
        raise NamespaceForbidden("the key is not bound to that namespace", field="X-Namespace")
    return named


def _scoped(scope: Scope) -> Callable[..., uuid.UUID]:
    def namespace(key: Caller,
                  x_namespace: Annotated[str | None, Header()] = None) -> uuid.UUID:
        ns = chosen_namespace(key, x_namespace)
        if not key.allows(ns, scope):
            held = key.granted(ns)[-1]
            raise ScopeRequired(f"this key holds {held} on namespace {ns}; the request needs "
                                f"{scope}", field="Authorization")
        route = current_route()
        if route is not None:  # where its reads go: a request that writes reads the primary
            route.namespace = ns
            route.writes = route.writes or scope != "read"
        return ns

    namespace.__name__ = f"{scope}_namespace"
    namespace.__doc__ = f"The caller's namespace, once its key holds `{scope}` on it."
    return namespace


read_namespace = _scoped("read")
write_namespace = _scoped("write")
admin_namespace = _scoped("admin")


def operator(key: Caller) -> ApiKey:
    """The caller's key, when it may read the operator's status (403 otherwise)."""
    if not key.operator:
        raise OperatorRequired("the operator's status takes an operator key",
                               field="Authorization")
    return key


ReadNs = Annotated[uuid.UUID, Depends(read_namespace)]
WriteNs = Annotated[uuid.UUID, Depends(write_namespace)]
AdminNs = Annotated[uuid.UUID, Depends(admin_namespace)]
Operator = Annotated[ApiKey, Depends(operator)]

# What each access dependency requires; a /v1 route declares at least one (tests/unit/
# test_route_scopes.py). `key`: any known key (GET /v1/me).
SCOPE_OF: dict[Callable[..., object], str] = {
    caller: "key", read_namespace: "read", write_namespace: "write",
    admin_namespace: "admin", operator: "operator"}
