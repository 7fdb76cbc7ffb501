"""Every endpoint over HTTP, with two tenants sharing titles and content: each sees only its own
rows, never a soft-deleted one, and every error is JSON with a stable code."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import Tenant

pytestmark = pytest.mark.stack


def _ids(body: dict[str, Any]) -> list[str]:
    return [o["id"] for o in body["objects"]]


def _error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code, error
    return dict(error)


def test_credentials(client: TestClient, tenants: dict[str, Tenant]) -> None:
    body = {"query": "acme"}
    _error(client.post("/v1/search", json=body), 401, "unauthorized")
    _error(client.post("/v1/search", json=body, headers={"Authorization": "Bearer nope"}),
           401, "unauthorized")
    both = {"Authorization": "Bearer key-both"}
    _error(client.post("/v1/search", json=body, headers=both), 422, "invalid_input")
    _error(client.post("/v1/search", json=body,
                       headers={**both, "X-Namespace": str(uuid.uuid4())}),
           403, "namespace_forbidden")
    ok = client.post("/v1/search", json=body,
                     headers={**both, "X-Namespace": str(tenants["b"].namespace)})
    assert ok.status_code == 200
    assert tenants["b"].ids["company"] in _ids(ok.json())


def test_search_is_hybrid_scoped_and_promotes_parts(client: TestClient,
                                                    tenants: dict[str, Tenant]) -> None:
    a, b = tenants["a"], tenants["b"]
    response = client.post("/v1/search", json={"query": "Rotterdam pilot site", "limit": 5},
                           headers=a.headers)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["degrade"] is None
    ids = _ids(body)
    assert ids[0] == a.ids["note"]
    assert not set(ids) & set(b.ids.values())
    note = body["objects"][0]
    assert note["kind"] == "note" and note["title"] == "Kickoff call with Acme"
    assert note["evidence"] and "Rotterdam" in note["evidence"][0]["snippet"]
    assert note["content"] is None  # content only on read
    everything = client.post("/v1/search", json={"query": "warehouse robot arms acme",
                                                 "limit": 50}, headers=a.headers).json()
    assert a.ids["ghost"] not in _ids(everything)  # soft-deleted
    assert set(_ids(everything)) <= set(a.ids.values())


def test_search_filters(client: TestClient, tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    deals = client.post("/v1/search", json={"query": "acme", "filters": {"kind": "deal"}},
                        headers=a.headers).json()
    assert _ids(deals) == [a.ids["deal"]]
    staged = client.post("/v1/search", json={"query": "acme",
                                             "filters": {"stage": ["won", "prospect"]}},
                         headers=a.headers).json()
    assert _ids(staged) == [a.ids["deal"]]
    none = client.post("/v1/search", json={"query": "acme", "filters": {"stage": "won"}},
                       headers=a.headers).json()
    assert none["objects"] == []
    error = _error(client.post("/v1/search", json={"query": "acme",
                                                   "filters": {"author": "sam"}},
                               headers=a.headers), 422, "invalid_filter")
    assert error["field"] == "filters.author"  # declared without operators: not filterable
    _error(client.post("/v1/search", json={"query": "   "}, headers=a.headers),
           422, "query_required")
    _error(client.post("/v1/search", json={"limit": 5}, headers=a.headers), 422,
           "query_required")
    error = _error(client.post("/v1/search", json={"query": "x", "limit": 0},
                               headers=a.headers), 422, "invalid_request")
    assert error["field"] == "limit"
    scoped = client.post("/v1/search", json={"query": "acme",
                                             "scope_ids": [a.ids["company"]]},
                         headers=a.headers).json()
    assert _ids(scoped) == [a.ids["company"]]


def test_find_exact(client: TestClient, tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    by_title = client.post("/v1/find_exact", json={"query": "Acme warehouse rollout"},
                           headers=a.headers).json()
    assert _ids(by_title)[0] == a.ids["deal"]
    by_id = client.post("/v1/find_exact", json={"query": a.ids["company"]},
                        headers=a.headers).json()
    assert _ids(by_id)[0] == a.ids["company"]
    foreign = client.post("/v1/find_exact", json={"query": tenants["b"].ids["only_b"]},
                          headers=a.headers).json()
    assert tenants["b"].ids["only_b"] not in _ids(foreign)


def test_paging_with_continue(client: TestClient, tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    first = client.post("/v1/search", json={"query": "acme", "limit": 1},
                        headers=a.headers).json()
    assert first["has_more"] and first["result_set_id"]
    seen = _ids(first)
    cursor = first["result_set_id"]
    while cursor:
        page = client.post("/v1/continue", json={"result_set_id": cursor, "limit": 1},
                           headers=a.headers).json()
        seen += _ids(page)
        cursor = page["result_set_id"] if page["has_more"] else None
    assert len(seen) == len(set(seen)) >= 3
    _error(client.post("/v1/continue", json={"result_set_id": first["result_set_id"]},
                       headers=tenants["b"].headers), 404, "result_set_not_found")


def test_find_objects_and_links(client: TestClient, tenants: dict[str, Tenant]) -> None:
    a, b = tenants["a"], tenants["b"]
    found = client.post("/v1/find_objects", json={"query": "Acme Robotics",
                                                  "kinds": ["company"]},
                        headers=a.headers).json()
    assert _ids(found)[0] == a.ids["company"]
    assert not set(_ids(found)) & set(b.ids.values())
    links = client.post("/v1/find_links", json={"relation_type": "buyer",
                                                "query": "buying entity"},
                        headers=a.headers).json()
    assert _ids(links) == [a.ids["company"]]
    relation = links["objects"][0]["relation"]
    assert relation["type"] == "buyer" and relation["source_id"] == a.ids["deal"]
    assert relation["note"] == "Acme is the buying entity" and relation["confidence"] == 0.95
    ghost = client.post("/v1/find_links", json={"relation_type": "buyer", "query": "ghost"},
                        headers=a.headers).json()
    assert ghost["objects"] == []  # its endpoint is soft-deleted


def test_expand(client: TestClient, tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    around_deal = client.post("/v1/expand", json={"object_id": a.ids["deal"], "max_hops": 2},
                              headers=a.headers).json()
    ids = _ids(around_deal)
    assert a.ids["company"] in ids and a.ids["note"] in ids
    assert a.ids["ghost"] not in ids
    assert around_deal["mode"] == "graph"
    company = next(o for o in around_deal["objects"] if o["id"] == a.ids["company"])
    assert company["relation"]["type"] == "buyer" and company["relation"]["direction"] == "out"
    outgoing = client.post("/v1/expand", json={"object_id": a.ids["deal"], "direction": "out",
                                               "relation_types": ["about"]},
                           headers=a.headers).json()
    assert outgoing["objects"] == []
    note = client.post("/v1/expand", json={"object_id": a.ids["note"]},
                       headers=a.headers).json()
    assert note["mode"] == "mixed"
    parts = [o for o in note["objects"] if o["parent_id"] == a.ids["note"]]
    assert [p["position"] for p in parts] == sorted(p["position"] for p in parts)
    _error(client.post("/v1/expand", json={"object_id": a.ids["deal"], "max_hops": 5},
                       headers=a.headers), 422, "invalid_request")
    _error(client.post("/v1/expand", json={"object_id": tenants["b"].ids["deal"]},
                       headers=a.headers), 404, "not_found")
    many = client.post("/v1/expand_many", json={"object_ids": [a.ids["deal"], a.ids["note"]],
                                                "neighbor_budget": 5},
                       headers=a.headers).json()
    assert a.ids["company"] in _ids(many)
    assert len(_ids(many)) == len(set(_ids(many)))


def test_recipes(client: TestClient, tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    registered = client.put("/v1/expand/recipes/buyers",
                            json={"relation_types": ["buyer"], "direction": "out"},
                            headers=a.headers)
    assert registered.status_code == 200, registered.text
    run = client.post("/v1/expand/recipe/buyers", json={"object_ids": [a.ids["deal"]]},
                      headers=a.headers).json()
    assert a.ids["company"] in _ids(run) and a.ids["note"] not in _ids(run)
    _error(client.post("/v1/expand/recipe/nope", json={"object_ids": [a.ids["deal"]]},
                       headers=a.headers), 404, "not_found")


def test_read_children_schema(client: TestClient, tenants: dict[str, Tenant]) -> None:
    a, b = tenants["a"], tenants["b"]
    note = client.get(f"/v1/objects/{a.ids['note']}", headers=a.headers).json()
    assert note["content"].startswith("# Kickoff")
    _error(client.get(f"/v1/objects/{a.ids['note']}", headers=b.headers), 404, "not_found")
    _error(client.get(f"/v1/objects/{a.ids['ghost']}", headers=a.headers), 404, "not_found")
    children = client.get(f"/v1/objects/{a.ids['note']}/children", headers=a.headers).json()
    positions = [c["position"] for c in children["objects"]]
    assert positions == sorted(positions) and len(positions) >= 1
    assert all(c["content"] for c in children["objects"])
    _error(client.get(f"/v1/objects/{a.ids['note']}/children", headers=b.headers), 404,
           "not_found")
    schema = client.get("/v1/schema", headers=a.headers).json()
    deal = next(k for k in schema["kinds"] if k["kind"] == "deal")
    stage = next(f for f in deal["fields"] if f["name"] == "stage")
    assert stage["filterable"] and stage["operators"] == ["eq", "in"]
    assert "find_objects" in schema["filter_usage"]
    _error(client.get("/v1/schema?kind=spaceship", headers=a.headers), 404, "not_found")


def test_ops_endpoints(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json()["dependencies"] == dict.fromkeys(
        ("postgres", "redis", "falkordb", "embedder", "lexical_replica"), "ok")
    metrics = client.get("/metrics").text
    assert "brainstream_api_request_seconds_bucket" in metrics
    assert client.get("/openapi.json").json()["paths"]["/v1/search"]


def test_a_form_encoded_body_says_what_to_send(client: TestClient,
                                               tenants: dict[str, Tenant]) -> None:
    response = client.post("/v1/search", content=b"query=acme",
                           headers={**tenants["a"].headers,
                                    "Content-Type": "application/x-www-form-urlencoded"})
    error = _error(response, 422, "invalid_request")
    assert "application/json" in error["message"] and error["field"] == "body"
    broken = client.post("/v1/search", content=b"{not json",
                         headers={**tenants["a"].headers, "Content-Type": "application/json"})
    assert broken.status_code in (400, 422) and "error" in broken.json()


def test_readyz_is_unavailable_while_the_workers_tally_is_unreadable(
        client: TestClient) -> None:
    """Issue 35 item 8: under `brainstream api` each worker's readiness is tallied in Redis
    (tests/resilience/test_api_workers.py runs two); when the tally cannot be read, no worker
    can say the instance is ready: 503, the count unknown, the cause named."""
    import redis.asyncio as aioredis

    from pipeline.wiring.worker_readiness import WorkerReadiness

    closed = aioredis.Redis(host="127.0.0.1", port=9, socket_connect_timeout=1)
    client.app.state.worker_readiness = WorkerReadiness(closed, "tests:0", 2)  # type: ignore[attr-defined]
    try:
        ready = client.get("/readyz")
    finally:
        client.app.state.worker_readiness = None  # type: ignore[attr-defined]
    assert ready.status_code == 503, ready.text
    body = ready.json()
    assert body["code"] == "workers_not_ready" and body["workers"] == {"ready": None,
                                                                      "expected": 2}
    assert set(body["dependencies"].values()) == {"ok"}  # the process itself is fine
