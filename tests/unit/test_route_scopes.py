"""Every `/v1` route declares what its key must hold (api/access.py): a scope on the
namespace (read, write, admin), the operator flag, or (GET /v1/me) only a known key. The walk
fails for a new route that declares none, and the table pins each route's scope, so a write
cannot be served to a read key by accident."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from api.access import SCOPE_OF
from api.app import create_app
from tests.stackutil import make_settings

# weakest first: a route's scope is the strongest it declares
ORDER = ("key", "read", "write", "admin", "operator")

EXPECTED = {
    ("POST", "/v1/search"): "read",
    ("POST", "/v1/find_exact"): "read",
    ("POST", "/v1/continue"): "read",
    ("POST", "/v1/find_objects"): "read",
    ("POST", "/v1/find_links"): "read",
    ("POST", "/v1/expand"): "read",
    ("POST", "/v1/expand_many"): "read",
    ("GET", "/v1/expand/recipes"): "read",
    ("GET", "/v1/expand/recipes/{name}"): "read",
    ("PUT", "/v1/expand/recipes/{name}"): "write",
    ("DELETE", "/v1/expand/recipes/{name}"): "write",
    ("POST", "/v1/expand/recipe/{name}"): "read",
    ("POST", "/v1/paths"): "read",
    ("GET", "/v1/objects/{object_id}"): "read",
    ("GET", "/v1/objects/{object_id}/children"): "read",
    ("GET", "/v1/schema"): "read",
    ("GET", "/v1/objects/{object_id}/history"): "read",
    ("GET", "/v1/links/{link_id}/history"): "read",
    ("GET", "/v1/links/history"): "read",
    ("POST", "/v1/resolve"): "read",
    ("GET", "/v1/entities/{entity_id}"): "read",
    ("GET", "/v1/entities/{entity_id}/mentions"): "read",
    ("GET", "/v1/entities/{entity_id}/facts"): "read",
    ("POST", "/v1/entities/search"): "read",
    ("GET", "/v1/entities/possibly_same"): "read",
    ("POST", "/v1/entities/merge"): "admin",
    ("POST", "/v1/entities/possibly_same/{from_id}/{to_id}"): "admin",
    ("GET", "/v1/sessions"): "read",
    ("GET", "/v1/sessions/{session_id}"): "read",
    ("GET", "/v1/sessions/{session_id}/memory"): "read",
    ("GET", "/v1/sessions/{session_id}/messages"): "read",
    ("POST", "/v1/sessions/{session_id}/messages"): "write",
    ("POST", "/v1/sessions/{session_id}/search"): "read",
    ("POST", "/v1/memory/search"): "read",
    ("POST", "/v1/events"): "write",
    ("POST", "/v1/objects/delete"): "write",
    ("GET", "/v1/admin/status"): "operator",
    ("GET", "/v1/me"): "key",
}


def _calls(dependant: Dependant) -> Iterator[Any]:
    for dep in dependant.dependencies:
        yield dep.call
        yield from _calls(dep)


def _flat(routes: list[Any]) -> Iterator[Any]:
    """Every route, those of included routers too (FastAPI keeps them behind the router; the
    app includes its routers without a prefix or dependencies)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        yield from _flat(included.routes) if included is not None else (route,)


def _v1_routes() -> dict[tuple[str, str], str | None]:
    app = create_app(make_settings())
    found: dict[tuple[str, str], str | None] = {}
    for route in _flat(app.routes):
        if not isinstance(route, APIRoute) or not route.path.startswith("/v1"):
            continue
        declared = [SCOPE_OF[call] for call in _calls(route.dependant) if call in SCOPE_OF]
        scope = max(declared, key=ORDER.index) if declared else None
        for method in route.methods - {"HEAD"}:
            found[(method, route.path)] = scope
    return found


@pytest.fixture(scope="module")
def routes() -> dict[tuple[str, str], str | None]:
    return _v1_routes()


def test_every_v1_route_declares_what_its_key_must_hold(
        routes: dict[tuple[str, str], str | None]) -> None:
    undeclared = sorted(route for route, scope in routes.items() if scope is None)
    assert not undeclared, f"/v1 routes that check no scope (api/access.py): {undeclared}"


def test_each_route_needs_the_scope_the_table_says(
        routes: dict[tuple[str, str], str | None]) -> None:
    assert routes == EXPECTED
