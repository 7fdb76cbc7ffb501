"""As-of reads over links (`as_of`, `known_at` on expand, expand_many, recipes, find_links,
paths), two tenants, on the real stack: objects and link events go through the write path (the
link events with their record times, as the consumer stamps them), the graph is projected.

`works_at` is functional. Each tenant's person works at C1 over [2010, 2015) and at C2 from 2015
(both recorded at R1); at R2 an event says the person works at C3 from 2020, which cuts C2 at
2020. A deleted company G advised the person over [2011, 2013). Now, the graph holds
person -> C3.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from pipeline.domain.relations import RelationSpec
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import RawRecord, ingest_options
from pipeline.ingest.store.catalog import apply_relations
from pipeline.ingest.store.events import PgEventStore
from pipeline.settings import Settings
from tests.apiutil import Tenant, api_client, ok
from tests.pipelineutil import envelope, ingest, put

R1 = datetime(2024, 1, 1, tzinfo=UTC)
R2 = datetime(2024, 6, 1, tzinfo=UTC)
BETWEEN = "2024-03-01T00:00:00Z"  # believed then: C2 open-ended, C3 unknown


def _link(ns: uuid.UUID, a: str, rel: str, b: str, note: str, valid_from: int,
          valid_to: int | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"from": a, "to": b, "relation_type": rel, "meta": {"note": note},
                            "valid_from": f"{valid_from}-01-01T00:00:00Z"}
    if valid_to is not None:
        data["valid_to"] = f"{valid_to}-01-01T00:00:00Z"
    return envelope("link.put", ns, data)


def _apply_at(settings: Settings, recorded: datetime, events: list[dict[str, Any]]) -> None:
    """The consumer's transaction over `events`, their records stamped `recorded`."""
    stamp = int(recorded.timestamp() * 1000)
    records = [RawRecord("t", 0, i, None, json.dumps(e).encode(), timestamp_ms=stamp)
               for i, e in enumerate(events)]
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn, \
            conn.transaction():
        outcome = apply_batch(PgEventStore(conn), records, ingest_options(settings))
    assert not outcome.dead, [d.describe() for d in outcome.dead]


@pytest.fixture(scope="module")
def tenants(catalog: Settings) -> dict[str, Tenant]:
    with psycopg.connect(catalog.effective_postgres_dsn, autocommit=True) as conn:
        apply_relations(conn, [RelationSpec("works_at", "employer", functional=True)])
    out = {}
    for name in ("a", "b"):
        ns = uuid.uuid4()
        ids = {k: str(uuid.uuid4()) for k in ("person", "c1", "c2", "c3", "ghost")}
        ingest(catalog, [put(ns, id=ids["person"], kind="company", title=f"Person {name}"),
                         *(put(ns, id=ids[k], kind="company", title=f"Company {k} {name}")
                           for k in ("c1", "c2", "c3", "ghost"))])
        p = ids["person"]
        _apply_at(catalog, R1, [
            _link(ns, p, "works_at", ids["c2"], "engineer from 2015", 2015),
            _link(ns, p, "works_at", ids["c1"], "engineer at the first one", 2010, 2015),
            _link(ns, ids["ghost"], "advises", p, "advice", 2011, 2013)])
        _apply_at(catalog, R2, [
            _link(ns, p, "works_at", ids["c3"], "engineer after the move", 2020)])
        ingest(catalog, [envelope("object.soft_delete", ns, {"id": ids["ghost"]})])
        out[name] = Tenant(ns, f"key-asof-{name}-{uuid.uuid4().hex[:8]}", ids)
    # a version of B's namespace from A's person (no event can write one): never A's
    a, b = out["a"], out["b"]
    with psycopg.connect(catalog.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO link_versions (namespace_id, from_id, relation_type, to_id, seq, state,"
            " meta, recorded_at, recorded_by, change) VALUES (%s, %s, 'works_at', %s, 1,"
            " 'holds', '{\"note\": \"engineer across tenants\"}', %s, 'tests', 'put')",
            (b.namespace, a.ids["person"], b.ids["c1"], R1))
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
    assert c2["relation"]["note"] == "engineer from 2015"
    assert c2["relation"]["direction"] == "out" and c2["relation"]["type"] == "works_at"
    assert _names(t, _expand(client, t, as_of="2022-01-01T00:00:00Z")) == ["c3"]
    # as known between R1 and R2: C2 still open-ended, C3 not known yet
    [then] = _expand(client, t, as_of="2022-01-01T00:00:00Z", known_at=BETWEEN)
    assert (then["id"], then["relation"]["valid_to"]) == (t.ids["c2"], None)
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
    assert now["id"] == t.ids["c3"] and now["relation"]["note"] == "engineer after the move"
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
        "engineer from 2015", "2015-01-01T00:00:00Z", "2020-01-01T00:00:00Z")
    assert hops("c1", as_of="2017-01-01T00:00:00Z") == []
    assert hops("c3", as_of="2022-01-01T00:00:00Z") == [["works_at"]]
    assert hops("c3", as_of="2022-01-01T00:00:00Z", known_at=BETWEEN) == []
    assert hops("c1") == []  # now: the current links only
    assert hops("c3") == [["works_at"]]


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
