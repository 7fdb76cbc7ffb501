"""As-of reads over links (`as_of`, `known_at` on expand, expand_many, recipes, find_links,
paths), two tenants, on the real stack: objects and current links go through the write path;
the link versions are written into `link_versions` as the history write path records them.

Each tenant's person works at C1 over [2010, 2015), then at C2 from 2015: first believed open
(recorded at R1), then cut at 2020 when a later event (R2) said the person moved to C3. A link to
G, a deleted company, held in 2012. The graph (the current state) holds person -> C2 only.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from pipeline.settings import Settings
from tests.apiutil import Tenant, api_client, ok
from tests.pipelineutil import envelope, ingest, put

R1 = datetime(2024, 1, 1, tzinfo=UTC)
R2 = datetime(2024, 6, 1, tzinfo=UTC)
BETWEEN = "2024-03-01T00:00:00Z"  # believed then: C2 open-ended


def _year(y: int) -> datetime:
    return datetime(y, 1, 1, tzinfo=UTC)


# (to, seq, valid_from, valid_to, recorded_at, invalidated_at, note)
VERSIONS = [
    ("c1", 1, _year(2010), _year(2015), R1, None, "engineer at the first one"),
    ("c2", 1, _year(2015), None, R1, R2, "engineer, open-ended"),
    ("c2", 2, _year(2015), _year(2020), R2, None, "engineer until the move"),
    ("c3", 1, _year(2020), None, R2, None, "engineer after the move"),
    ("ghost", 1, _year(2011), _year(2013), R1, None, "engineer at the ghost"),
]


def _insert(conn: psycopg.Connection[Any], ns: uuid.UUID, from_id: str, rows: list[Any]
            ) -> None:
    for to, seq, valid_from, valid_to, recorded, invalidated, note in rows:
        conn.execute(
            "INSERT INTO link_versions (namespace_id, from_id, relation_type, to_id, seq, state,"
            " meta, valid_from, valid_to, asserted_to, recorded_at, recorded_by, change,"
            " invalidated_at, invalidated_by) VALUES (%s, %s, 'works_at', %s, %s, 'holds',"
            " %s::jsonb, %s, %s, %s, %s, 'tests', 'put', %s, %s)",
            (ns, from_id, to, seq, psycopg.types.json.Json({"note": note}), valid_from,
             valid_to, valid_to, recorded, invalidated, "tests" if invalidated else None))


@pytest.fixture(scope="module")
def tenants(catalog: Settings) -> dict[str, Tenant]:
    out = {}
    for name in ("a", "b"):
        ns = uuid.uuid4()
        ids = {k: str(uuid.uuid4()) for k in ("person", "c1", "c2", "c3", "ghost")}
        events = [put(ns, id=ids["person"], kind="company", title=f"Person {name}"),
                  *(put(ns, id=ids[k], kind="company", title=f"Company {k} {name}")
                    for k in ("c1", "c2", "c3", "ghost")),
                  envelope("link.put", ns, {"from": ids["person"], "to": ids["c2"],
                                            "relation_type": "works_at",
                                            "meta": {"note": "engineer now"}}),
                  envelope("object.soft_delete", ns, {"id": ids["ghost"]})]
        ingest(catalog, events)
        out[name] = Tenant(ns, f"key-asof-{name}-{uuid.uuid4().hex[:8]}", ids)
    with psycopg.connect(catalog.effective_postgres_dsn, autocommit=True) as conn:
        for tenant in out.values():
            _insert(conn, tenant.namespace, tenant.ids["person"],
                    [(tenant.ids[to], *rest) for to, *rest in VERSIONS])
        # a version of B's namespace from A's person: never part of A's answers
        a, b = out["a"], out["b"]
        _insert(conn, b.namespace, a.ids["person"],
                [(b.ids["c1"], 1, None, None, R1, None, "engineer across tenants")])
    return out


@pytest.fixture(scope="module")
def client(catalog: Settings, tenants: dict[str, Tenant]) -> Iterator[TestClient]:
    with api_client(catalog, tenants.values(), "write") as test_client:
        yield test_client


def _expand(client: TestClient, t: Tenant, **times: str) -> list[dict[str, Any]]:
    body = {"object_id": t.ids["person"], "relation_types": ["works_at"],
            "want_containment": False, **times}
    return ok(client.post("/v1/expand", json=body, headers=t.headers))["objects"]


def _names(t: Tenant, objects: list[dict[str, Any]]) -> list[str]:
    by_id = {v: k for k, v in t.ids.items()}
    return [by_id.get(o["id"], o["id"]) for o in objects]


@pytest.mark.parametrize("name", ["a", "b"])
def test_expand_as_of_answers_the_links_that_held_then(
        client: TestClient, tenants: dict[str, Tenant], name: str) -> None:
    t = tenants[name]
    assert _names(t, _expand(client, t, as_of="2012-06-01T00:00:00Z")) == ["c1"]
    assert _names(t, _expand(client, t, as_of="2005-01-01T00:00:00+02:00")) == []
    [c2] = _expand(client, t, as_of="2017-01-01T00:00:00Z")
    assert (c2["id"], c2["relation"]["valid_from"], c2["relation"]["valid_to"]) == (
        t.ids["c2"], "2015-01-01T00:00:00Z", "2020-01-01T00:00:00Z")
    assert c2["relation"]["note"] == "engineer until the move"
    assert c2["relation"]["direction"] == "out" and c2["relation"]["type"] == "works_at"
    assert _names(t, _expand(client, t, as_of="2022-01-01T00:00:00Z")) == ["c3"]
    # as known between R1 and R2: C2 still open-ended, C3 not known yet
    [then] = _expand(client, t, as_of="2022-01-01T00:00:00Z", known_at=BETWEEN)
    assert (then["id"], then["relation"]["valid_to"]) == (t.ids["c2"], None)
    assert then["relation"]["note"] == "engineer, open-ended"
    # known_at alone: the world now, as known then
    assert _names(t, _expand(client, t, known_at=BETWEEN)) == ["c2"]
    # known before anything was recorded: nothing
    assert _expand(client, t, as_of="2012-06-01T00:00:00Z",
                   known_at="2023-01-01T00:00:00Z") == []
    # a known_at in the future is now
    assert _names(t, _expand(client, t, as_of="2017-01-01T00:00:00Z",
                             known_at="2999-01-01T00:00:00Z")) == ["c2"]


def test_without_times_the_answer_is_the_graph(client: TestClient,
                                               tenants: dict[str, Tenant]) -> None:
    t = tenants["a"]
    [now] = _expand(client, t)
    assert now["id"] == t.ids["c2"] and now["relation"]["note"] == "engineer now"
    assert now["relation"]["valid_from"] is None and now["relation"]["valid_to"] is None


def test_reverse_and_two_hops_as_of(client: TestClient, tenants: dict[str, Tenant]) -> None:
    t = tenants["a"]
    body = {"object_id": t.ids["c1"], "want_containment": False, "direction": "in",
            "as_of": "2012-06-01T00:00:00Z"}
    [person] = ok(client.post("/v1/expand", json=body, headers=t.headers))["objects"]
    assert person["id"] == t.ids["person"] and person["relation"]["direction"] == "in"
    body = {"object_id": t.ids["c1"], "want_containment": False, "max_hops": 2,
            "as_of": "2012-06-01T00:00:00Z"}
    objects = ok(client.post("/v1/expand", json=body, headers=t.headers))["objects"]
    assert _names(t, objects) == ["person"]  # the ghost is deleted: neither reached nor shown


def test_expand_many_and_recipes_as_of(client: TestClient,
                                       tenants: dict[str, Tenant]) -> None:
    t = tenants["b"]
    body = {"object_ids": [t.ids["person"], t.ids["c3"]], "relation_types": ["works_at"],
            "as_of": "2012-06-01T00:00:00Z"}
    objects = ok(client.post("/v1/expand_many", json=body, headers=t.headers))["objects"]
    assert _names(t, objects) == ["c1"]
    recipe = {"relation_types": ["works_at"], "want_containment": False}
    ok(client.put("/v1/expand/recipes/employer", json=recipe, headers=t.headers))
    run = {"object_ids": [t.ids["person"]], "as_of": "2022-01-01T00:00:00Z"}
    objects = ok(client.post("/v1/expand/recipe/employer", json=run,
                             headers=t.headers))["objects"]
    assert _names(t, objects) == ["c3"]
    assert objects[0]["relation"]["valid_from"] == "2020-01-01T00:00:00Z"


def test_find_links_as_of(client: TestClient, tenants: dict[str, Tenant]) -> None:
    def find(t: Tenant, **times: str) -> list[dict[str, Any]]:
        body = {"relation_type": "works_at", "query": "engineer", **times}
        found: list[dict[str, Any]] = ok(client.post("/v1/find_links", json=body,
                                                     headers=t.headers))["objects"]
        return found

    for t in tenants.values():
        [hit] = find(t, as_of="2012-06-01T00:00:00Z")
        assert (hit["id"], hit["relation"]["source_id"]) == (t.ids["c1"], t.ids["person"])
        assert hit["relation"]["valid_to"] == "2015-01-01T00:00:00Z"
        assert _names(t, find(t, as_of="2017-01-01T00:00:00Z", known_at=BETWEEN)) == ["c2"]
        assert find(t, as_of="2005-01-01T00:00:00Z") == []
        body = {"relation_type": "works_at", "query": "move", "as_of": "2022-01-01T00:00:00Z"}
        moved = ok(client.post("/v1/find_links", json=body, headers=t.headers))["objects"]
        assert _names(t, moved) == ["c3"]


def test_paths_as_of(client: TestClient, tenants: dict[str, Tenant]) -> None:
    t = tenants["a"]

    def paths(to: str, **times: str) -> list[dict[str, Any]]:
        body = {"from": [t.ids["person"]], "to": [t.ids[to]], "max_hops": 2, **times}
        found: list[dict[str, Any]] = ok(client.post("/v1/paths", json=body,
                                                     headers=t.headers))["paths"]
        return found

    def hops(to: str, **times: str) -> list[list[str]]:
        return [[e["relation_type"] for e in p["edges"]] for p in paths(to, **times)]

    assert hops("c1", as_of="2012-06-01T00:00:00Z") == [["works_at"]]
    [path] = paths("c2", as_of="2017-01-01T00:00:00Z")
    [cite] = path["edges"][0]["evidence"]
    assert (cite["note"], cite["valid_from"], cite["valid_to"]) == (
        "engineer until the move", "2015-01-01T00:00:00Z", "2020-01-01T00:00:00Z")
    assert hops("c1", as_of="2017-01-01T00:00:00Z") == []
    assert hops("c3", as_of="2022-01-01T00:00:00Z") == [["works_at"]]
    assert hops("c3", as_of="2022-01-01T00:00:00Z", known_at=BETWEEN) == []
    assert hops("c1") == []  # now: the current links only


def test_tenants_never_see_each_other(client: TestClient, tenants: dict[str, Tenant]) -> None:
    a, b = tenants["a"], tenants["b"]
    # B's version from A's person is not A's: A's 1990s hold nothing
    assert _expand(client, a, as_of="1990-01-01T00:00:00Z") == []
    body = {"object_id": a.ids["person"], "as_of": "2012-06-01T00:00:00Z"}
    assert client.post("/v1/expand", json=body, headers=b.headers).status_code == 404
    body = {"relation_type": "works_at", "query": "tenants", "as_of": "2012-06-01T00:00:00Z"}
    assert ok(client.post("/v1/find_links", json=body, headers=b.headers))["objects"] == []
    assert ok(client.post("/v1/find_links", json=body, headers=a.headers))["objects"] == []


@pytest.mark.parametrize("field", ["as_of", "known_at"])
def test_a_bad_time_is_a_422_naming_the_field(client: TestClient,
                                               tenants: dict[str, Tenant], field: str) -> None:
    t = tenants["a"]
    for bad in ("2012-06-01T00:00:00", "yesterday"):
        for path, body in (("/v1/expand", {"object_id": t.ids["person"]}),
                           ("/v1/find_links", {"relation_type": "works_at", "query": "x"}),
                           ("/v1/paths", {"from": [t.ids["person"]], "to": [t.ids["c1"]]})):
            response = client.post(path, json={**body, field: bad}, headers=t.headers)
            assert response.status_code == 422, response.text
            assert response.json()["error"]["field"] == field
