"""Similarity search and caller-supplied vectors over the real stack (write path, embedding stage,
lexical index, API), with two tenants holding the same texts and vectors under other ids."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from fastapi.testclient import TestClient

from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import RawRecord, ingest_options
from pipeline.ingest.store.events import PgEventStore
from pipeline.settings import Settings
from tests.apiutil import Tenant, api_client
from tests.pipelineutil import envelope, ingest, put

pytestmark = pytest.mark.stack

DIM = 256  # the stack's embedder: static
RNG = np.random.default_rng(7)


def _unit(v: np.ndarray[Any, Any]) -> list[float]:
    return [float(x) for x in v / np.linalg.norm(v)]


BASE = RNG.normal(size=DIM)
V1 = _unit(BASE)
V2 = _unit(BASE + 0.05 * RNG.normal(size=DIM))  # a near-duplicate of V1 (cosine ~0.99)
V3 = _unit(RNG.normal(size=DIM))  # unrelated
LONG = " ".join(f"Paragraph {i} about warehouse robot arms and conveyor belts." for i in range(60))


def _vector(values: list[float], model: str = "static") -> dict[str, Any]:
    return {"model": model, "values": values}


def _events(ns: uuid.UUID, ids: dict[str, str], extra: bool) -> list[dict[str, Any]]:
    events = [
        put(ns, id=ids["x1"], kind="company", title="Warehouse robot arms",
            summary="Industrial robot arms picking boxes in warehouses.", vector=_vector(V1)),
        put(ns, id=ids["x2"], kind="company", title="Warehouse robot arm systems",
            summary="Industrial robot arms picking parcels in warehouses.", vector=_vector(V2)),
        put(ns, id=ids["x3"], kind="company", title="Cheese tasting tours",
            summary="Guided tours of alpine cheese cellars.", vector=_vector(V3)),
        put(ns, id=ids["x4"], kind="company", title="Robot arm maintenance",
            summary="Servicing industrial robot arms."),
        put(ns, id=ids["gone"], kind="company", title="Warehouse robot arms (old)",
            summary="Industrial robot arms picking boxes.", vector=_vector(V1)),
        envelope("object.soft_delete", ns, {"id": ids["gone"]}),
    ]
    if extra:  # B alone: an exact twin of x1's vector, which A must never see
        events.append(put(ns, id=ids["twin"], kind="company", title="Robot arms twin",
                          summary="Industrial robot arms picking boxes in warehouses.",
                          vector=_vector(V1)))
    return events


@pytest.fixture(scope="module")
def tenants(catalog: Settings) -> dict[str, Tenant]:
    out = {}
    for name in ("a", "b"):
        ns = uuid.uuid4()
        ids = {k: str(uuid.uuid4()) for k in ("x1", "x2", "x3", "x4", "gone", "twin")}
        ingest(catalog, _events(ns, ids, extra=name == "b"))
        out[name] = Tenant(ns, f"key-sim-{name}-{uuid.uuid4().hex[:8]}", ids)
    return out


@pytest.fixture(scope="module")
def client(catalog: Settings, tenants: dict[str, Tenant]) -> Iterator[TestClient]:
    with api_client(catalog, tenants.values()) as test_client:
        yield test_client


def _search(client: TestClient, tenant: Tenant, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/search", json=body, headers=tenant.headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


def _ids(tenant: Tenant, body: dict[str, Any]) -> list[str]:
    names = {v: k for k, v in tenant.ids.items()}
    return [names.get(o["id"], "foreign") for o in body["objects"]]


def _error(client: TestClient, tenant: Tenant, body: dict[str, Any], status: int,
           field: str) -> dict[str, Any]:
    response = client.post("/v1/search", json=body, headers=tenant.headers)
    assert response.status_code == status, response.text
    error = dict(response.json()["error"])
    assert error["field"] == field, error
    return error


def test_caller_vectors_are_stored_and_kept(catalog: Settings,
                                            tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    with psycopg.connect(catalog.effective_postgres_dsn) as conn:
        rows = dict(conn.execute(
            "SELECT id::text, model FROM object_embeddings WHERE id = ANY(%s::uuid[])",
            ([a.ids["x1"], a.ids["x4"]],)).fetchall())
        stored = conn.execute("SELECT embedding::text FROM object_embeddings WHERE id = %s",
                              (a.ids["x1"],)).fetchone()
    assert rows[a.ids["x1"]] == "caller:static"  # the embedding stage ran and left it
    assert rows[a.ids["x4"]].startswith("static:")
    assert stored is not None
    assert np.allclose(json.loads(stored[0]), V1, atol=1e-6)


def test_similar_to_finds_the_near_duplicate_first(client: TestClient,
                                                   tenants: dict[str, Tenant]) -> None:
    a, b = tenants["a"], tenants["b"]
    got = _ids(a, _search(client, a, {"similar_to": a.ids["x1"], "limit": 10}))
    assert got[0] == "x2"
    assert "x1" not in got and "gone" not in got and "foreign" not in got
    # near-duplicates: only rows within the floor, of the caller's namespace
    assert _ids(a, _search(client, a, {"similar_to": a.ids["x1"], "min_score": 0.95})) == ["x2"]
    assert sorted(_ids(b, _search(client, b, {"similar_to": b.ids["x1"], "min_score": 0.95}))
                  ) == ["twin", "x2"]


def test_similar_to_filters_and_scope_apply(client: TestClient,
                                            tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    body = {"similar_to": a.ids["x1"], "scope_ids": [a.ids["x3"], a.ids["x4"]]}
    assert set(_ids(a, _search(client, a, body))) <= {"x3", "x4"}
    body = {"similar_to": a.ids["x1"], "filters": {"kind": "deal"}}
    assert _ids(a, _search(client, a, body)) == []


def test_similar_to_of_another_tenant_or_deleted_is_not_found(
        client: TestClient, tenants: dict[str, Tenant]) -> None:
    a, b = tenants["a"], tenants["b"]
    for target in (b.ids["x1"], b.ids["twin"], a.ids["gone"], str(uuid.uuid4())):
        error = _error(client, a, {"similar_to": target}, 404, "similar_to")
        assert error["code"] == "not_found"


def test_query_vector(client: TestClient, tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    got = _ids(a, _search(client, a, {"vector": _vector(V1), "limit": 3}))
    assert got[:2] == ["x1", "x2"]
    # the model's other name; with a query text the other channels search it
    body = {"vector": _vector(V3, "wordllama"), "query": "cheese cellars"}
    assert _ids(a, _search(client, a, body))[0] == "x3"
    _error(client, a, {"vector": _vector(V1[:10])}, 422, "vector.values")
    _error(client, a, {"vector": _vector(V1, "minilm")}, 422, "vector.model")


def test_min_score_is_a_range_paged_by_continue(client: TestClient,
                                                tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    first = _search(client, a, {"vector": _vector(V1), "min_score": -1.0, "limit": 1})
    seen = _ids(a, first)
    cursor = first["result_set_id"]
    while cursor:
        page = client.post("/v1/continue", json={"result_set_id": cursor, "limit": 1},
                           headers=a.headers).json()
        seen += _ids(a, page)
        cursor = page["result_set_id"] if page["has_more"] else None
    assert sorted(seen) == ["x1", "x2", "x3", "x4"]  # everything A has: the floor is -1
    assert _ids(a, _search(client, a, {"vector": _vector(V1), "min_score": 0.999})) == ["x1"]


def test_allowed_combinations(client: TestClient, tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    _error(client, a, {"limit": 3}, 422, "query")
    _error(client, a, {"min_score": 0.5}, 422, "query")
    _error(client, a, {"similar_to": a.ids["x1"], "vector": _vector(V1)}, 422, "vector")
    _error(client, a, {"similar_to": a.ids["x1"], "query": "robot"}, 422, "query")
    _error(client, a, {"similar_to": a.ids["x1"], "mode": "ppr"}, 422, "mode")
    _error(client, a, {"query": "robot", "min_score": 1.5}, 422, "min_score")


def _apply(settings: Settings, events: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    records = [RawRecord("t", 0, i, None, json.dumps(e).encode()) for i, e in enumerate(events)]
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn, \
            conn.transaction():
        outcome = apply_batch(PgEventStore(conn), records, ingest_options(settings))
    return [(d.error.code, d.error.field) for d in outcome.dead]


def test_put_vectors_that_do_not_fit_are_dead_lettered(catalog: Settings) -> None:
    ns = uuid.uuid4()
    ok = str(uuid.uuid4())
    dead = _apply(catalog, [
        put(ns, id=str(uuid.uuid4()), kind="company", title="short", vector=_vector(V1[:8])),
        put(ns, id=str(uuid.uuid4()), kind="company", title="model", vector=_vector(V1, "x")),
        put(ns, id=str(uuid.uuid4()), kind="company", title="long", content=LONG,
            vector=_vector(V1)),
        put(ns, id=ok, kind="company", title="fits", vector=_vector(V1)),  # the rest flow
    ])
    assert dead == [("vector_mismatch", "data.vector.values"),
                    ("vector_mismatch", "data.vector.model"),
                    ("vector_on_parts", "data.vector")]
    with psycopg.connect(catalog.effective_postgres_dsn) as conn:
        row = conn.execute("SELECT model, embed_status FROM object_embeddings WHERE id = %s",
                           (ok,)).fetchone()
    assert row == ("caller:static", "done")


def test_a_put_without_vector_reverts_to_the_model(catalog: Settings) -> None:
    ns = uuid.uuid4()
    oid = str(uuid.uuid4())
    fields = {"id": oid, "kind": "company", "title": "Revert me", "summary": "same text"}
    ingest(catalog, [put(ns, **fields, vector=_vector(V3))])
    ingest(catalog, [put(ns, **fields)])  # the same text, no vector
    with psycopg.connect(catalog.effective_postgres_dsn) as conn:
        row = conn.execute("SELECT model, embed_status, embedding::text FROM object_embeddings"
                           " WHERE id = %s", (oid,)).fetchone()
    assert row is not None
    assert row[0].startswith("static:") and row[1] == "done"
    assert not np.allclose(json.loads(row[2]), V3, atol=1e-3)
