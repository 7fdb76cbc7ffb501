"""Hostile cases of the read API's results (issue 10, items 5, 13, 14), on the real stack.

Result sets hold ids and scores only, in their own Redis database, capped and flagged when cut;
readiness and 503 answers carry codes, not the dependency's error text; malformed ids, offsets
and limits are 422 naming the field; expansion pages like every ranked read; a tenant never
reads another's result set; and an embedder that failed its warm-up is picked up again in the
background, search turning from lexical-only to hybrid without a restart.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from api.app import create_app
from pipeline.domain.errors import ConfigError
from pipeline.embedding.embedders import StaticEmbedder
from pipeline.settings import Settings
from pipeline.wiring import embedder as loader
from tests.apiutil import ApiTenant, api_keys, read_side
from tests.embedders.test_http_embedder import EmbeddingsHandler, ServerState
from tests.httpserve import serve
from tests.pipelineutil import envelope, ingest, put, wait_for

pytestmark = pytest.mark.stack

SPOKES = 7
SECRET_PROPERTY = "zephyrine-author"
SECRET_WORD = "quillwort"


@dataclass
class Tenant(ApiTenant):
    hub: str
    spokes: list[str]
    notes: list[str]


def _tenant(settings: Settings) -> Tenant:
    ns = uuid.uuid4()
    hub, spokes = str(uuid.uuid4()), [str(uuid.uuid4()) for _ in range(SPOKES)]
    notes = [str(uuid.uuid4()) for _ in range(4)]
    events = [put(ns, id=hub, kind="company", title="Hub Robotics")]
    for i, spoke in enumerate(spokes):
        events += [put(ns, id=spoke, kind="company", title=f"Spoke {i} Robotics"),
                   envelope("link.put", ns, {"from": hub, "to": spoke,
                                             "relation_type": "partner"})]
    for i, note in enumerate(notes):
        content = (f"# Turbine review {i}\n\nThe turbine gearbox {i} needs a {SECRET_WORD} "
                   f"inspection.\n\nTurbine blades were fine on site {i}.")
        events.append(put(ns, id=note, kind="note", title=f"Turbine note {i}", content=content,
                          content_type="text/markdown", properties={"author": SECRET_PROPERTY}))
    ingest(settings, events)
    return Tenant(ns, f"key-{uuid.uuid4().hex[:12]}", hub, spokes, notes)


@pytest.fixture(scope="module")
def tenants(catalog: Settings) -> dict[str, Tenant]:
    return {"a": _tenant(catalog), "b": _tenant(catalog)}


@pytest.fixture(scope="module")
def settings(catalog: Settings, tenants: dict[str, Tenant]) -> Settings:
    return catalog.model_copy(update={"api_keys": api_keys(tenants.values())})


@pytest.fixture(scope="module")
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def _ids(page: dict[str, Any]) -> list[str]:
    return [o["id"] for o in page["objects"]]


def _walk(client: TestClient, tenant: Tenant, first: dict[str, Any], limit: int
          ) -> list[dict[str, Any]]:
    """Every page of an answer: the first and each `continue` after it."""
    pages = [first]
    while pages[-1]["has_more"]:
        resp = client.post("/v1/continue", headers=tenant.headers,
                           json={"result_set_id": pages[-1]["result_set_id"], "limit": limit})
        assert resp.status_code == 200, resp.text
        pages.append(resp.json())
    return pages


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- item 13: result sets ---------------------------------------------------------------------


def test_a_stored_result_set_holds_ids_and_scores_only(
        client: TestClient, settings: Settings, tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    whole = client.post("/v1/search", json={"query": "turbine gearbox", "limit": 100},
                        headers=a.headers).json()
    first = client.post("/v1/search", json={"query": "turbine gearbox", "limit": 1},
                        headers=a.headers).json()
    assert first["has_more"] and len(whole["objects"]) >= 3
    set_id = first["result_set_id"].split(".")[0]
    key = f"brainstream:rs:{a.namespace}:{set_id}"
    with redis.Redis.from_url(settings.result_set_redis_url) as store:
        raw = store.get(key)
    assert raw is not None, "the result set is not in its configured database"
    stored = json.loads(raw)
    for item in stored["items"]:
        assert set(item) <= {"id", "score", "evidence", "relation"}, item
        assert all(len(e) == 2 for e in item["evidence"]), item  # [part_id, score]
    text = raw.decode()
    for leaked in ("properties", "snippet", "title", SECRET_PROPERTY, SECRET_WORD):
        assert leaked not in text, f"{leaked!r} stored in the result set"
    # served pages still carry full evidence, rebuilt from Postgres: the same as a single page
    pages = _walk(client, a, first, limit=1)
    served = [o for p in pages for o in p["objects"]]
    assert [o["id"] for o in served] == _ids(whole)
    assert [o["evidence"] for o in served] == [o["evidence"] for o in whole["objects"]]
    assert any(e["properties"] == {"author": SECRET_PROPERTY}
               for o in served[1:] for e in o["evidence"])


def test_result_sets_live_in_their_own_database(
        client: TestClient, settings: Settings, tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    first = client.post("/v1/search", json={"query": "turbine", "limit": 1},
                        headers=a.headers).json()
    key = f"brainstream:rs:{a.namespace}:{first['result_set_id'].split('.')[0]}"
    assert settings.result_set_redis_db != 0
    with redis.Redis.from_url(settings.effective_redis_url) as broker, \
            redis.Redis.from_url(settings.result_set_redis_url) as result_sets:
        assert broker.connection_pool.connection_kwargs["db"] == 0  # Celery's database
        assert not broker.exists(key)
        assert result_sets.exists(key) and result_sets.ttl(key) > 0  # evictable under LRU
    with pytest.raises(ConfigError) as refused:
        _ = settings.model_copy(update={"result_set_redis_db": 0}).result_set_redis_url
    assert refused.value.field == "result_set_redis_db"


def test_a_set_over_the_cap_is_truncated_and_says_so(
        settings: Settings, tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    with read_side(search={"result_set_max_items": 3}), TestClient(
            create_app(settings)) as client:
        first = client.post("/v1/expand", headers=a.headers,
                            json={"object_id": a.hub, "want_containment": False, "limit": 1})
        assert first.status_code == 200, first.text
        pages = _walk(client, a, first.json(), limit=1)
    assert len(pages) == 3 and all(p["truncated"] for p in pages)
    assert [i for p in pages for i in _ids(p)] and not pages[-1]["has_more"]


# -- item 14: readiness, errors, validation, expand paging, tenants -----------------------------


def test_readyz_and_503_answer_codes_not_dependency_text(
        settings: Settings, tenants: dict[str, Tenant]) -> None:
    port = _closed_port()
    broken = settings.model_copy(update={"falkordb_url": f"redis://127.0.0.1:{port}",
                                         "redis_url": f"redis://127.0.0.1:{port}/0"})
    a = tenants["a"]
    with TestClient(create_app(broken)) as client:
        ready = client.get("/readyz")
        outage = client.post("/v1/search", json={"query": "turbine", "limit": 1},
                             headers=a.headers)
        metrics = client.get("/metrics").text
    assert ready.status_code == 503
    body = ready.json()
    assert body.pop("generation") >= 1
    assert body == {"status": "unavailable", "code": "dependency_unavailable",
                    "dependencies": {"postgres": "ok", "redis": "down", "falkordb": "down",
                                     "embedder": "ok", "lexical_replica": "ok"}}
    assert outage.status_code == 503, outage.text
    assert outage.json()["error"]["code"] == "unavailable"
    for answer in (ready.text, outage.text):
        assert str(port) not in answer and "127.0.0.1" not in answer, answer
    assert 'brainstream_api_dependency_up{dependency="redis"} 0.0' in metrics


@pytest.mark.parametrize("result_set_id", ["x.²", "x", "abc.1e20", "abc.-1", "abc.",
                                           "abc.99999999", "ABC.1", "abc.1.2", "abc\n"])
def test_malformed_result_set_ids_are_422(client: TestClient, tenants: dict[str, Tenant],
                                          result_set_id: str) -> None:
    resp = client.post("/v1/continue", json={"result_set_id": result_set_id},
                       headers=tenants["a"].headers)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["field"] == "result_set_id"


@pytest.mark.parametrize(("query", "field"), [
    ("offset=1e20", "offset"), ("offset=100000000000000000000", "offset"),
    ("offset=-1", "offset"), ("offset=99999999999", "offset"),
    ("limit=0", "limit"), ("limit=100000", "limit"), ("limit=1e3", "limit")])
def test_children_offset_and_limit_are_bounded(client: TestClient, tenants: dict[str, Tenant],
                                               query: str, field: str) -> None:
    a = tenants["a"]
    resp = client.get(f"/v1/objects/{a.notes[0]}/children?{query}", headers=a.headers)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["field"] == field


def test_other_ids_and_bounds_are_422_naming_the_field(
        client: TestClient, tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    cases = [
        (client.get("/v1/objects/not-a-uuid", headers=a.headers), "object_id"),
        (client.get(f"/v1/schema?kind={'k' * 500}", headers=a.headers), "kind"),
        (client.post("/v1/expand", json={"object_id": a.hub, "limit": 10**20},
                     headers=a.headers), "limit"),
        (client.post("/v1/expand_many", json={"object_ids": [a.hub], "neighbor_budget": 0},
                     headers=a.headers), "neighbor_budget"),
        (client.post("/v1/continue", json={"result_set_id": "abc", "limit": 0},
                     headers=a.headers), "limit"),
    ]
    for resp, field in cases:
        assert resp.status_code == 422, resp.text
        assert resp.json()["error"]["field"] == field, resp.text


def test_expand_pages_past_its_limit(client: TestClient, tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    first = client.post("/v1/expand", headers=a.headers,
                        json={"object_id": a.hub, "want_containment": False, "limit": 3})
    assert first.status_code == 200, first.text
    assert first.json()["has_more"] and first.json()["result_set_id"]
    pages = _walk(client, a, first.json(), limit=3)
    reached = [i for p in pages for i in _ids(p)]
    assert sorted(reached) == sorted(a.spokes)
    assert all(p["mode"] == "graph" and not p["truncated"] for p in pages)


def test_a_tenant_cannot_read_another_tenants_result_set(
        client: TestClient, tenants: dict[str, Tenant]) -> None:
    a, b = tenants["a"], tenants["b"]
    for path, body in (("/v1/search", {"query": "turbine", "limit": 1}),
                       ("/v1/expand", {"object_id": a.hub, "limit": 1})):
        first = client.post(path, json=body, headers=a.headers).json()
        assert first["result_set_id"]
        stolen = client.post("/v1/continue", json={"result_set_id": first["result_set_id"]},
                             headers=b.headers)
        assert stolen.status_code == 404, stolen.text
        assert stolen.json()["error"]["code"] == "result_set_not_found"
        mine = client.post("/v1/continue", json={"result_set_id": first["result_set_id"]},
                           headers=a.headers)
        assert mine.status_code == 200 and _ids(mine.json()), mine.text


# -- item 5: the embedder comes back without a restart --------------------------------------------


@pytest.fixture()
def embedding_server() -> Iterator[tuple[str, ServerState]]:
    """An OpenAI-compatible embedding server (the static embedder behind it) that fails with
    503 until the test sets `state.mode = "ok"`."""
    state = ServerState(mode="status:503")
    handler = type("Handler", (EmbeddingsHandler,), {"state": state, "embedder": StaticEmbedder()})
    with serve(handler) as url:
        yield url, state


def test_search_turns_hybrid_once_the_embedder_recovers(
        settings: Settings, tenants: dict[str, Tenant],
        embedding_server: tuple[str, ServerState], monkeypatch: pytest.MonkeyPatch) -> None:
    url, state = embedding_server
    monkeypatch.setattr(loader, "EMBEDDER_RETRY_MAX_WAIT", 0.2)
    http = settings.model_copy(update={"embedder": "http", "embedder_url": url,
                                       "embedding_dim": settings.vector_dim})
    a = tenants["a"]

    def search() -> dict[str, Any]:
        resp = client.post("/v1/search", json={"query": "turbine gearbox"}, headers=a.headers)
        assert resp.status_code == 200, resp.text
        return dict(resp.json())

    with TestClient(create_app(http)) as client:
        down = search()
        assert down["degrade"] == "lexical_only" and _ids(down)
        assert client.get("/readyz").json()["dependencies"]["embedder"] == "down"
        wait_for(lambda: len(state.requests) >= 3, timeout=20,
                 what="the API to retry loading the embedder")
        with state.lock:
            state.mode = "ok"
        recovered = wait_for(lambda: (page := search())["degrade"] is None and page,
                             timeout=20, what="search to become hybrid again")
        assert set(_ids(recovered)) & set(a.notes)
        assert client.get("/readyz").json()["dependencies"]["embedder"] == "ok"
