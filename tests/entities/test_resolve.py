"""Entity resolution through the API on the real stack: `/v1/resolve` layer by layer, reading
an entity, curators' merges and pair decisions, and the proposal pass; two tenants each."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from api.routes.entities import RESOLVE_MAX_QUERIES
from pipeline.embedding.embedders import StaticEmbedder
from pipeline.entities.merging import propose_for, propose_pending
from tests.entities.conftest import Tenant, add_entity


@pytest.fixture(scope="module")
def seeded(base_db: psycopg.Connection[Any], tenants: dict[str, Tenant]) -> dict[str, Tenant]:
    a, b = tenants["a"], tenants["b"]
    vector = StaticEmbedder().embed(["rendering subsystem"])[0]
    add_entity(base_db, a, "Acme Robotics", mentions=2)
    add_entity(base_db, a, "National Aeronautics and Space Administration")
    add_entity(base_db, a, "parse_http_request", "IDENTIFIER")
    add_entity(base_db, a, "Amendment 16")
    add_entity(base_db, a, "São Paulo")
    add_entity(base_db, a, "Michael Jordan", "PERSON", aliases=[("Jordan", "surface")])
    add_entity(base_db, a, "Jordan River", "LOC", aliases=[("Jordan", "surface")])
    add_entity(base_db, a, "Graphics Pipeline", embedding=[float(x) for x in vector])
    add_entity(base_db, b, "Acme Robotics")
    return tenants


def _embedder_loaded(client: TestClient) -> None:
    deadline = time.monotonic() + 30
    while client.app.state.services.embedder is None:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the query embedder never loaded"
        time.sleep(0.1)


def _resolve(client: TestClient, tenant: Tenant, **body: Any) -> list[dict[str, Any]]:
    answer = client.post("/v1/resolve", json=body, headers=tenant.headers)
    assert answer.status_code == 200, answer.text
    results: list[dict[str, Any]] = answer.json()["results"]
    return results


def test_each_layer_answers_with_its_method(client: TestClient,
                                            seeded: dict[str, Tenant]) -> None:
    _embedder_loaded(client)
    a = seeded["a"]
    queries = ["acme robotics", "NASA", "parseHttpRequest"]
    exact, initials, segments = _resolve(client, a, queries=queries)
    assert (exact["entity_id"], exact["method"], exact["confidence"]) == (
        str(a.entities["Acme Robotics"]), "exact", 1.0)
    assert {e["object_id"] for e in exact["evidence"]} == set(a.notes[:2])
    assert (initials["entity_id"], initials["method"]) == (
        str(a.entities["National Aeronautics and Space Administration"]), "initials")
    assert initials["confidence"] < 0.95  # an acronym alone is never a merge
    assert (segments["entity_id"], segments["method"]) == (
        str(a.entities["parse_http_request"]), "segments")
    [fold] = _resolve(client, a, query="Sao Paulo")
    assert (fold["entity_id"], fold["method"]) == (str(a.entities["São Paulo"]), "fold")
    [semantic] = _resolve(client, a, query="rendering subsystem")
    assert (semantic["entity_id"], semantic["method"]) == (
        str(a.entities["Graphics Pipeline"]), "embedding")
    assert semantic["skipped"] == []


def test_unresolved_answers_say_why(client: TestClient, seeded: dict[str, Tenant]) -> None:
    a = seeded["a"]
    numbered, homonym, nothing = _resolve(client, a, queries=["Amendment 17", "Jordan",
                                                              "zqxw vbnm"])
    # a different number is shown as a candidate, never chosen
    assert numbered["unresolved"] and numbered["reason"] == "below_threshold"
    assert numbered["candidates"][0]["entity_id"] == str(a.entities["Amendment 16"])
    assert homonym["unresolved"] and homonym["reason"] == "tie"
    assert {c["entity_id"] for c in homonym["candidates"][:2]} == {
        str(a.entities["Michael Jordan"]), str(a.entities["Jordan River"])}
    assert nothing == {"query": "zqxw vbnm", "unresolved": True, "reason": "no_candidates",
                       "candidates": [], "evidence": [], "skipped": []}
    [person] = _resolve(client, a, query="Jordan", labels=["PERSON"])
    assert (person["entity_id"], person["method"]) == (str(a.entities["Michael Jordan"]),
                                                       "alias")


def test_tenants_resolve_and_read_only_their_own(client: TestClient,
                                                 seeded: dict[str, Tenant]) -> None:
    a, b = seeded["a"], seeded["b"]
    [mine] = _resolve(client, b, query="Acme Robotics")
    assert mine["entity_id"] == str(b.entities["Acme Robotics"])
    assert all(e["object_id"] in b.notes for e in mine["evidence"])
    [theirs] = _resolve(client, b, query="NASA")
    assert theirs["reason"] == "no_candidates"
    other = client.get(f"/v1/entities/{a.entities['Acme Robotics']}", headers=b.headers)
    assert other.status_code == 404 and other.json()["error"]["code"] == "not_found"
    own = client.get(f"/v1/entities/{a.entities['Michael Jordan']}", headers=a.headers).json()
    assert own["aliases"] == [{"alias": "Jordan", "source": "surface"}]
    assert own["counts"] == {"mentions": 1, "aliases": 1, "edges": {}}


@pytest.mark.parametrize(("body", "field"), [
    ({}, "query"),
    ({"query": "a", "queries": ["b"]}, "query"),
    ({"queries": [f"q{i}" for i in range(RESOLVE_MAX_QUERIES + 1)]}, "queries"),
    ({"query": "   "}, "query"),
    ({"query": "a\u0000b"}, "query"),
    ({"query": "a", "labels": ["not a label"]}, "labels.0"),
    ({"query": "a", "limit": 0}, "limit"),
    ({"query": "a", "extra": 1}, "extra"),
])
def test_bad_resolve_requests_name_the_field(client: TestClient, seeded: dict[str, Tenant],
                                             body: dict[str, Any], field: str) -> None:
    answer = client.post("/v1/resolve", json=body, headers=seeded["a"].headers)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == field


def _outbox(base_db: psycopg.Connection[Any], ns: uuid.UUID) -> set[tuple[str, uuid.UUID]]:
    """The namespace's outbox rows other than objects' and links' (the graph holds no entity)."""
    rows = base_db.execute("SELECT op, aggregate_id FROM outbox WHERE namespace_id = %s"
                      " AND op NOT IN ('node_sync', 'edge_sync')", (ns,)).fetchall()
    return {(str(op), agg) for op, agg in rows}


def test_curator_merges_after_a_dry_run(client: TestClient, base_db: psycopg.Connection[Any],
                                        seeded: dict[str, Tenant]) -> None:
    a, b = seeded["a"], seeded["b"]
    old = add_entity(base_db, a, "ACME Robotic Arms", aliases=[("Acme arms", "surface")])
    keep, other = a.entities["Acme Robotics"], a.entities["São Paulo"]
    for x, y, w in ((old, other, 2.0), (keep, other, 3.0), (old, keep, 1.0)):
        low, high = sorted((x, y), key=lambda u: u.bytes)
        base_db.execute("INSERT INTO entity_edges (namespace_id, from_id, to_id, edge_type, weight,"
                   " evidence) VALUES (%s, %s, %s, 'CO_OCCURS', %s, %s)",
                   (a.namespace, low, high, w, [uuid.UUID(a.notes[0])]))
    body = {"from": str(old), "into": str(keep)}
    refused = client.post("/v1/entities/merge", json=body, headers=a.headers)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "scope_required"
    elsewhere = client.post("/v1/entities/merge", json=body, headers=b.curator)
    assert elsewhere.status_code == 404 and elsewhere.json()["error"]["field"] == "from"

    dry = client.post("/v1/entities/merge", json={**body, "dry_run": True}, headers=a.curator)
    assert dry.status_code == 200, dry.text
    assert dry.json() | {"objects": None} == {
        "from": str(old), "into": str(keep), "dry_run": True, "mentions": 1, "aliases": 1,
        "edges_moved": 1, "edges_dropped": 1, "objects": None, "merge_id": None,
        "part_count": None}
    assert client.get(f"/v1/entities/{old}", headers=a.headers).json()["id"] == str(old)

    done = client.post("/v1/entities/merge", json=body, headers=a.curator).json()
    assert done["merge_id"] is not None and done["part_count"] == 2  # notes 0 and 1
    after = client.get(f"/v1/entities/{old}", headers=a.headers).json()
    assert (after["id"], after["merged_from"]) == (str(keep), str(old))
    assert {"alias": "ACME Robotic Arms", "source": "merge"} in after["aliases"]
    assert {"alias": "Acme arms", "source": "surface"} in after["aliases"]
    edges = base_db.execute("SELECT from_id, to_id, weight FROM entity_edges"
                            " WHERE namespace_id = %s AND edge_type = 'CO_OCCURS'",
                            (a.namespace,)).fetchall()
    assert [(set(e[:2]), e[2]) for e in edges] == [({keep, other}, 5.0)]
    history = base_db.execute("SELECT decided_by, method FROM entity_merges WHERE id = %s",
                         (done["merge_id"],)).fetchone()
    assert history == ("curator-of-a", "person")
    assert _outbox(base_db, a.namespace) == set()  # a merge is Postgres' alone
    again = client.post("/v1/entities/merge", json=body, headers=a.curator)
    assert again.status_code == 422 and again.json()["error"]["code"] == "entity_merged"
    [resolved] = _resolve(client, a, query="ACME Robotic Arms")
    assert (resolved["entity_id"], resolved["method"]) == (str(keep), "alias")


def test_proposals_merge_hold_and_respect_refusals(client: TestClient,
                                                   base_db: psycopg.Connection[Any],
                                                   seeded: dict[str, Tenant]) -> None:
    a, b = seeded["a"], seeded["b"]
    accent = add_entity(base_db, b, "Sao Paulo")
    existing = add_entity(base_db, b, "São Paulo", mentions=2)
    company = add_entity(base_db, b, "Globex")
    suffixed = add_entity(base_db, b, "Globex Corporation")
    numbered = add_entity(base_db, b, "Amendment 17")
    add_entity(base_db, b, "Amendment 16")
    proposals = propose_for(base_db, b.namespace, [accent, suffixed, numbered])
    assert [(p.entity_id, p.decision, p.merged_into) for p in proposals] == [
        (accent, "merge", existing), (suffixed, "possibly_same", None)]
    history = base_db.execute("SELECT decided_by, method FROM entity_merges WHERE from_id = %s",
                         (accent,)).fetchone()
    assert history == ("resolver", "fold")

    path = f"/v1/entities/possibly_same/{company}/{suffixed}"
    foreign = client.post(path, json={"decision": "refuse"}, headers=a.curator)
    assert foreign.status_code == 404
    bad = client.post(path, json={"decision": "maybe"}, headers=b.curator)
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "decision"
    refused = client.post(path, json={"decision": "refuse"}, headers=b.curator)
    assert refused.json()["status"] == "refused"
    assert propose_for(base_db, b.namespace, [suffixed]) == []  # never proposed again
    status = base_db.execute("SELECT status FROM entity_edges WHERE edge_type = 'POSSIBLY_SAME'"
                        " AND %s IN (from_id, to_id)", (suffixed,)).fetchone()
    assert status == ("refused",)

    person = add_entity(base_db, b, "Bill Gates", "PERSON")
    nickname = add_entity(base_db, b, "William Gates", "PERSON")
    assert [p.decision for p in propose_for(base_db, b.namespace, [nickname])] == ["possibly_same"]
    verified = client.post(f"/v1/entities/possibly_same/{nickname}/{person}",
                           json={"decision": "verify"}, headers=b.curator).json()
    assert verified["status"] == "verified" and verified["merge"]["into"] == str(person)
    history = base_db.execute("SELECT decided_by, method, note FROM entity_merges"
                              " WHERE from_id = %s", (nickname,)).fetchone()
    assert history == ("curator-of-b", "nickname", "verified possibly_same")


def test_the_runner_examines_each_new_entity_once(base_db: psycopg.Connection[Any],
                                                  seeded: dict[str, Tenant]) -> None:
    b = seeded["b"]
    fresh = uuid.uuid4()
    base_db.execute("INSERT INTO entities (id, namespace_id, name, norm, label) VALUES"
               " (%s, %s, 'Zurich', 'zurich', 'NAME')", (fresh, b.namespace))
    target = add_entity(base_db, b, "Zürich", mentions=2)
    examined: list[Any] = []
    while batch := propose_pending(base_db, batch=50):
        examined.extend(batch)
    assert any(p.entity_id == fresh and p.merged_into == target for p in examined)
    left = base_db.execute("SELECT count(*) FROM entity_proposal_queue q JOIN entities e"
                           " ON e.id = q.entity_id WHERE e.merged_into IS NULL").fetchone()
    assert left == (0,)


def test_a_homonym_ranked_first_does_not_hide_the_next_candidate(
        base_db: psycopg.Connection[Any], seeded: dict[str, Tenant]) -> None:
    a = seeded["a"]
    band = add_entity(base_db, a, "Bob-Marley", "ORG")  # folds like the person: a homonym, 0.9
    person = add_entity(base_db, a, "Robert Marley", "PERSON")  # a nickname away: 0.85
    new = add_entity(base_db, a, "Bob Marley", "PERSON")
    proposals = propose_for(base_db, a.namespace, [new])
    assert [(p.other_id, p.decision) for p in proposals] == [(person, "possibly_same")]
    assert band not in {p.other_id for p in proposals}


def test_resolve_holds_no_connection_while_it_waits_on_the_embedder(
        client: TestClient, seeded: dict[str, Tenant], monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35 item 12: the phrases are embedded before a pooled connection is taken (a slow
    embedder used to hold one of the read pool's few connections per request)."""
    _embedder_loaded(client)
    svc = client.app.state.services  # type: ignore[attr-defined]
    real = svc.name_embedder
    embedding, release = threading.Event(), threading.Event()

    class SlowEmbedder:
        def embed(self, texts: list[str]) -> Any:
            embedding.set()
            release.wait(30)
            return real.embed(texts)

    monkeypatch.setattr(type(svc), "name_embedder", property(lambda self: SlowEmbedder()))
    stats = svc.pool.get_stats
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(client.post, "/v1/resolve", json={"query": "acme robotics"},
                             headers=seeded["a"].headers)
        try:
            assert embedding.wait(30)
            assert stats().get("pool_size", 0) - stats().get("pool_available", 0) == 0
        finally:
            release.set()
        assert answer.result().status_code == 200
