"""`GET /v1/objects/{id}` lists the entities an object names, with their mentions, per tenant.

Two tenants publish the same text: each gets its own entities (ids derived from its namespace)
and sees only those; the other tenant's object is a 404 like any unknown id.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from psycopg_pool import ConnectionPool

from api.app import create_app
from api.routes import objects as objects_route
from pipeline.entities.ids import entity_id
from pipeline.entities.stage import ExtractionStage
from pipeline.settings import Settings
from tests.entities.stageutil import CapsExtractor, apply, put

TEXT = "Grace Hopper built the compiler; later Grace Hopper met Aiken"


@pytest.fixture(scope="module")
def tenants(edb: Settings, epool: ConnectionPool) -> dict[str, tuple[uuid.UUID, uuid.UUID, str]]:
    """name -> (namespace, object id, API key); the same title and content in both."""
    out = {}
    for name in ("a", "b"):
        ns, oid = uuid.uuid4(), uuid.uuid4()
        apply(edb, [put(ns, oid, title="Harvard notes", content=TEXT)])
        out[name] = (ns, oid, f"key-{name}-{uuid.uuid4().hex[:8]}")
    ExtractionStage(edb, epool, CapsExtractor()).run()
    return out


def client_for(edb: Settings, tenants: dict[str, tuple[uuid.UUID, uuid.UUID, str]],
               **settings: object) -> TestClient:
    keys = {key: [str(ns)] for ns, _, key in tenants.values()}
    return TestClient(create_app(edb.model_copy(update={"api_keys": keys, **settings})))


@pytest.fixture(scope="module")
def client(edb: Settings, tenants: dict[str, tuple[uuid.UUID, uuid.UUID, str]]
           ) -> Iterator[TestClient]:
    with client_for(edb, tenants) as test_client:
        yield test_client


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_each_tenant_sees_its_own_entities_with_mentions(
        client: TestClient, tenants: dict[str, tuple[uuid.UUID, uuid.UUID, str]]) -> None:
    seen = {}
    for name, (ns, oid, key) in tenants.items():
        response = client.get(f"/v1/objects/{oid}", headers=auth(key))
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["entities_truncated"] is False
        by_name = {e["name"]: e for e in body["entities"]}
        assert set(by_name) == {"Harvard", "Grace Hopper", "Aiken"}
        hopper = by_name["Grace Hopper"]
        assert hopper["entity_id"] == str(entity_id(ns, "grace hopper"))
        assert hopper["label"] == "NAME" and hopper["mention_count"] == 2
        assert body["entities"][0]["name"] == "Grace Hopper"  # the most mentioned first
        part = hopper["mentions"][0]["row_id"]
        assert part != str(oid)  # the content is in the object's part
        assert [(m["field"], m["start"], m["end"], m["text"]) for m in hopper["mentions"]] == [
            ("content", 0, 12, "Grace Hopper"), ("content", 39, 51, "Grace Hopper")]
        assert by_name["Harvard"]["mentions"][0]["row_id"] == str(oid)  # from the title
        seen[name] = {e["entity_id"] for e in body["entities"]}
    assert not seen["a"] & seen["b"]  # same text, different entities


def test_another_tenants_object_is_not_found(
        client: TestClient, tenants: dict[str, tuple[uuid.UUID, uuid.UUID, str]]) -> None:
    _, b_object, _ = tenants["b"]
    response = client.get(f"/v1/objects/{b_object}", headers=auth(tenants["a"][2]))
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_entities_are_capped(edb: Settings,
                             tenants: dict[str, tuple[uuid.UUID, uuid.UUID, str]],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    _, oid, key = tenants["a"]
    monkeypatch.setattr(objects_route, "OBJECT_ENTITIES_MAX", 1)
    monkeypatch.setattr(objects_route, "OBJECT_MENTIONS_MAX", 1)
    with client_for(edb, tenants) as capped:
        body = capped.get(f"/v1/objects/{oid}", headers=auth(key)).json()
    assert body["entities_truncated"] is True
    assert [(e["name"], len(e["mentions"]), e["mention_count"]) for e in body["entities"]] == [
        ("Grace Hopper", 1, 2)]
