"""Issue 10, item 7: expand recipes belong to a namespace; operator defaults are read-only.

Two tenants on one API: each registers, lists, reads, runs and deletes its own recipes and never
sees the other's; a recipe of a default's name shadows the default for that tenant alone; no key
can delete a default (403 `recipe_read_only`), and a namespace holds a bounded number.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from pipeline.retrieval.store import recipes
from pipeline.settings import Settings
from tests.pipelineutil import ingest, put

pytestmark = pytest.mark.stack

TEAM = {"relation_types": ["buyer"], "max_hops": 1, "direction": "out"}


class Tenants:
    def __init__(self) -> None:
        self.ns = {name: uuid.uuid4() for name in ("a", "b")}
        self.keys = {name: f"recipes-{name}-{uuid.uuid4().hex[:8]}" for name in self.ns}
        self.legacy = f"legacy-{uuid.uuid4().hex[:8]}"
        self.deal = {name: str(uuid.uuid4()) for name in self.ns}

    def headers(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[name]}"}


@pytest.fixture(scope="module")
def tenants(catalog: Settings) -> Iterator[Tenants]:
    t = Tenants()
    for name, ns in t.ns.items():
        ingest(catalog, [put(ns, id=t.deal[name], kind="deal", title="A deal",
                             properties={"stage": "won"})])
    # a recipe registered before recipes were scoped: migration 0011 made it a stored default
    with psycopg.connect(catalog.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO expand_recipes (name, spec) VALUES (%s, %s)",
                     (t.legacy, '{"max_hops": 2}'))
        yield t
        conn.execute("DELETE FROM expand_recipes WHERE name = %s", (t.legacy,))


@pytest.fixture(scope="module")
def client(catalog: Settings, tenants: Tenants) -> Iterator[TestClient]:
    settings = catalog.model_copy(update={
        "api_keys": {tenants.keys[n]: {"name": f"recipes-{n}", "scopes": {str(ns): ["write"]}}
                     for n, ns in tenants.ns.items()},
        "expand_recipes": {"team": TEAM}})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(recipes, "MAX_PER_NAMESPACE", 3)
        with TestClient(create_app(settings)) as test_client:
            yield test_client


def _error(response: Any, status: int, code: str, field: str = "name") -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["field"] == field


def _listed(client: TestClient, tenants: Tenants, name: str) -> dict[str, tuple[str, Any]]:
    response = client.get("/v1/expand/recipes", headers=tenants.headers(name))
    assert response.status_code == 200, response.text
    return {r["name"]: (r["source"], r["spec"]) for r in response.json()["recipes"]}


def test_a_tenants_recipe_is_its_own(client: TestClient, tenants: Tenants) -> None:
    a, b = tenants.headers("a"), tenants.headers("b")
    spec = {"relation_types": ["about"], "direction": "in", "max_hops": 2}
    assert client.put("/v1/expand/recipes/mine", json=spec, headers=a).status_code == 200
    listed_a, listed_b = _listed(client, tenants, "a"), _listed(client, tenants, "b")
    assert listed_a["mine"][0] == "namespace" and listed_a["mine"][1]["max_hops"] == 2
    assert "mine" not in listed_b
    assert {listed_a["team"][0], listed_a[tenants.legacy][0]} == {"default"}
    assert {listed_b["team"][0], listed_b[tenants.legacy][0]} == {"default"}
    # B can neither run, read, overwrite for A, nor delete A's recipe
    _error(client.post("/v1/expand/recipe/mine", json={"object_ids": [tenants.deal["b"]]},
                       headers=b), 404, "not_found")
    _error(client.get("/v1/expand/recipes/mine", headers=b), 404, "not_found")
    _error(client.delete("/v1/expand/recipes/mine", headers=b), 404, "not_found")
    assert client.put("/v1/expand/recipes/mine", json={"max_hops": 4}, headers=b
                      ).status_code == 200  # B's own recipe of that name
    assert client.get("/v1/expand/recipes/mine", headers=a).json()["spec"]["max_hops"] == 2
    run = client.post("/v1/expand/recipe/mine", json={"object_ids": [tenants.deal["a"]]},
                      headers=a)
    assert run.status_code == 200, run.text
    assert client.delete("/v1/expand/recipes/mine", headers=a).status_code == 204
    _error(client.get("/v1/expand/recipes/mine", headers=a), 404, "not_found")
    assert client.get("/v1/expand/recipes/mine", headers=b).json()["spec"]["max_hops"] == 4


def test_defaults_are_read_only_and_shadowed_per_tenant(client: TestClient,
                                                        tenants: Tenants) -> None:
    a, b = tenants.headers("a"), tenants.headers("b")
    for name in ("team", tenants.legacy):
        _error(client.delete(f"/v1/expand/recipes/{name}", headers=a), 403,
               "recipe_read_only")
    shadow = {"relation_types": ["about"], "max_hops": 3}
    assert client.put("/v1/expand/recipes/team", json=shadow, headers=a).status_code == 200
    mine = client.get("/v1/expand/recipes/team", headers=a).json()
    assert (mine["source"], mine["spec"]["max_hops"]) == ("namespace", 3)
    theirs = client.get("/v1/expand/recipes/team", headers=b).json()
    assert (theirs["source"], theirs["spec"]["relation_types"]) == ("default", ["buyer"])
    # deleting the shadow brings the default back; the default itself stays
    assert client.delete("/v1/expand/recipes/team", headers=a).status_code == 204
    back = client.get("/v1/expand/recipes/team", headers=a).json()
    assert (back["source"], back["spec"]["relation_types"]) == ("default", ["buyer"])
    _error(client.delete("/v1/expand/recipes/team", headers=a), 403, "recipe_read_only")
    legacy = client.get(f"/v1/expand/recipes/{tenants.legacy}", headers=b).json()
    assert (legacy["source"], legacy["spec"]["max_hops"]) == ("default", 2)


def test_a_namespace_holds_a_bounded_number_of_recipes(client: TestClient,
                                                       tenants: Tenants) -> None:
    b = tenants.headers("b")
    for name in ("r1", "r2", "r3", "r4"):
        client.delete(f"/v1/expand/recipes/{name}", headers=b)
    client.delete("/v1/expand/recipes/mine", headers=b)
    for name in ("r1", "r2", "r3"):
        assert client.put(f"/v1/expand/recipes/{name}", json={}, headers=b).status_code == 200
    _error(client.put("/v1/expand/recipes/r4", json={}, headers=b), 422, "too_many_recipes")
    # replacing one is not adding one; A's count is its own
    assert client.put("/v1/expand/recipes/r3", json={"max_hops": 2}, headers=b
                      ).status_code == 200
    assert client.put("/v1/expand/recipes/r4", json={}, headers=tenants.headers("a")
                      ).status_code == 200
    _error(client.put("/v1/expand/recipes/bad%20name", json={}, headers=b), 422,
           "invalid_input")


@pytest.mark.parametrize("recipes", [
    {"team": {"relation_types": ["buyer"], "max_hops": 99}},  # past MAX_HOPS
    {"team": {"no_such_field": 1}},
    {"bad name!": TEAM},
])
def test_a_malformed_operator_recipe_stops_the_api_at_start(catalog: Settings,
                                                            recipes: dict[str, Any]) -> None:
    # Before: the API started, and every tenant's list, read or run of recipes answered 500.
    from pipeline.domain.errors import ConfigError

    with pytest.raises(ConfigError, match="EXPAND_RECIPES"):
        create_app(catalog.model_copy(update={"expand_recipes": recipes}))
