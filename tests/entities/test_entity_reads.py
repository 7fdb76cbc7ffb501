"""The entity layer in `/v1/schema` (labels and edge types with counts, per namespace) and in
`POST /v1/find_objects` (`include_entities`), on the real stack with two tenants."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from fastapi.testclient import TestClient

from pipeline.settings import Settings
from tests.apiutil import api_client, ok
from tests.entities.pathsutil import DEL_TEXT, World, build_world, mention

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def worlds(catalog: Settings) -> dict[str, World]:
    """Two tenants with the same graph; A's NASA has an alias and A has an entity only a deleted
    object names; B has one more entity, a quantity."""
    a, b = build_world(catalog), build_world(catalog)
    with psycopg.connect(catalog.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO entity_aliases (namespace_id, norm, alias, entity_id, source)"
                     " VALUES (%s, 'national aeronautics and space administration',"
                     " 'National Aeronautics and Space Administration', %s, 'manual')",
                     (a.namespace, a.entities["X3"]))
        ghost = a.entities["ghost"] = str(uuid.uuid4())
        conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label, part_count)"
                     " VALUES (%s, %s, 'Armstrong Ghost', 'armstrong ghost', 'NAME', 0)",
                     (ghost, a.namespace))
        mention(conn, a.namespace, a.objects["Odel"], DEL_TEXT + " Armstrong Ghost", ghost,
                "Armstrong Ghost", "NAME")
        extra = b.entities["extra"] = str(uuid.uuid4())
        conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label, part_count)"
                     " VALUES (%s, %s, '42 km', '42 km', 'QUANTITY', 1)", (extra, b.namespace))
    return {"a": a, "b": b}


def test_schema_lists_entity_labels_and_edge_types_per_namespace(
        worlds_client: TestClient, worlds: dict[str, World]) -> None:
    a, b = worlds["a"], worlds["b"]
    schema = ok(worlds_client.get("/v1/schema", headers=a.headers))
    assert schema["kinds"]  # the kinds are still there
    entities = schema["entities"]
    # the ghost entity is named by no live row: not counted
    assert entities["labels"] == [{"label": "NAME", "count": 3},
                                  {"label": "ACRONYM", "count": 1}]
    assert entities["edge_types"] == [{"type": "CO_OCCURS", "count": 1},
                                      {"type": "RELATES", "count": 2}]
    assert entities["predicates"] == [{"predicate": "launched_by", "count": 1},
                                      {"predicate": "worked_for", "count": 1}]
    other = ok(worlds_client.get("/v1/schema", headers=b.headers))["entities"]
    assert {"label": "QUANTITY", "count": 1} in other["labels"]
    assert "QUANTITY" not in [x["label"] for x in entities["labels"]]


def test_schema_counts_possibly_same_by_status(catalog: Settings,
                                               worlds_client: TestClient) -> None:
    world = build_world(catalog)
    with psycopg.connect(catalog.effective_postgres_dsn, autocommit=True) as conn:
        for status, (x, y) in (("held", ("X1", "X4")), ("verified", ("X2", "X4")),
                               ("refused", ("X3", "X4"))):
            a, b = sorted((world.entities[x], world.entities[y]))
            conn.execute("INSERT INTO entity_edges (namespace_id, from_id, to_id, edge_type,"
                         " status, confidence) VALUES (%s, %s, %s, 'POSSIBLY_SAME', %s, 0.8)",
                         (world.namespace, a, b, status))
    with api_client(catalog, [world]) as own:
        types = ok(own.get("/v1/schema", headers=world.headers))["entities"]["edge_types"]
    assert {"type": "POSSIBLY_SAME", "count": 3,
            "by_status": {"held": 1, "refused": 1, "verified": 1}} in types


def test_find_objects_returns_entities_when_asked(worlds_client: TestClient,
                                                  worlds: dict[str, World]) -> None:
    a = worlds["a"]
    found = ok(worlds_client.post("/v1/find_objects", json={"query": "Neil Armstrong",
                                                            "include_entities": True},
                                  headers=a.headers))
    first = found["entities"][0]
    assert (first["id"], first["type"], first["matched"], first["score"]) == (
        a.entities["X1"], "entity", "exact", 1.0)
    assert first["name"] == "Neil Armstrong" and first["label"] == "NAME"
    assert "objects" in found and "has_more" in found  # the objects' page is still there

    alias = ok(worlds_client.post("/v1/find_objects", json={
        "query": "National Aeronautics and Space Administration", "include_entities": True},
        headers=a.headers))["entities"]
    assert (alias[0]["id"], alias[0]["matched"], alias[0]["via"]) == (
        a.entities["X3"], "alias", "National Aeronautics and Space Administration")

    near = ok(worlds_client.post("/v1/find_objects", json={"query": "Armstrong",
                                                           "include_entities": True},
                                 headers=a.headers))["entities"]
    # trigram-near; the entity only a deleted object names never comes back
    assert [e["id"] for e in near] == [a.entities["X1"]]
    assert near[0]["matched"] == "trigram" and 0 < near[0]["score"] < 0.95


def test_find_objects_is_unchanged_without_the_option(worlds_client: TestClient,
                                                      worlds: dict[str, World]) -> None:
    a = worlds["a"]
    body = {"query": "Neil Armstrong"}
    plain = ok(worlds_client.post("/v1/find_objects", json=body, headers=a.headers))
    assert "entities" not in plain
    assert set(plain) == {"objects", "result_set_id", "has_more", "degrade", "mode",
                          "truncated", "explain", "facets"}  # every page's keys (search's too)
    off = ok(worlds_client.post("/v1/find_objects", json={**body, "include_entities": False},
                                headers=a.headers))
    assert "entities" not in off


def test_find_objects_entities_are_per_namespace(worlds_client: TestClient,
                                                 worlds: dict[str, World]) -> None:
    a, b = worlds["a"], worlds["b"]
    mine = ok(worlds_client.post("/v1/find_objects",
                                 json={"query": "NASA", "include_entities": True},
                                 headers=b.headers))["entities"]
    assert [e["id"] for e in mine] == [b.entities["X3"]]
    other = ok(worlds_client.post("/v1/find_objects", json={"query": "42 km",
                                                            "include_entities": True},
                                  headers=a.headers))["entities"]
    assert other == []


def test_find_objects_refuses_a_bad_option(worlds_client: TestClient,
                                           worlds: dict[str, World]) -> None:
    response = worlds_client.post("/v1/find_objects", json={"query": "NASA",
                                                            "include_entities": "maybe"},
                                  headers=worlds["a"].headers)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "include_entities"
