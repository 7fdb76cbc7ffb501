"""Mode `auto`'s gate on the real stack: entities from the real extraction stage (heuristic);
a question naming only common words is answered by hybrid even where one of its words is an
entity (`ppr` would seed on it), a bridging question naming a film runs PPR from the film and
finds the bridging passage, and a second tenant with the same texts and no entities gets
hybrid and only its own objects.

The corpus and the bridging question are tests/entities/test_ppr.py's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from pipeline.settings import Settings
from tests.apiutil import read_side
from tests.entities.holdutil import extract_now, hold_extraction
from tests.entities.test_ppr import DOCS, QUESTION, Tenant
from tests.pipelineutil import ingest, put

# Only common words; its first word is also the first word of the title "Birthplace registry",
# which the extractor reads as the entity "Birthplace".
COMMON = "Birthplace of the person who directed the harbor film?"


@pytest.fixture(scope="module")
def tenants(catalog: Settings) -> dict[str, Tenant]:
    """Tenant x (entities from the extraction stage) and y (the same documents, none)."""
    out = {}
    for name in ("x", "y"):
        ns = uuid.uuid4()
        ids = {doc: str(uuid.uuid4()) for doc in DOCS}
        ingest(catalog, [put(ns, id=ids[doc], kind="note", title=title, content=text)
                         for doc, (title, text) in DOCS.items()])
        tenant = Tenant(ns, f"key-gate-{name}-{uuid.uuid4().hex[:8]}", ids)
        if name == "x":
            extract_now(catalog, ids.values())
        else:  # the live pipeline's extract process must not give y entities either
            hold_extraction(catalog, ns)
        out[name] = tenant
    return out


@pytest.fixture(scope="module")
def client(catalog: Settings, tenants: dict[str, Tenant]) -> Iterator[TestClient]:
    # as in test_ppr.py: a corpus of 20 rows needs a small hub floor, and the walk from the
    # entities alone (ten passages' worth of weak seeds would drown one bridge)
    settings = catalog.model_copy(update={
        "api_keys": {t.key: [str(t.namespace)] for t in tenants.values()},
        "decay_lambda": 0.0})
    with read_side(ppr={"hub_min_rows": 3, "passage_seed_weight": 0.0}), TestClient(
            create_app(settings)) as test_client:
        yield test_client


def _search(client: TestClient, tenant: Tenant, query: str, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/search", json={"query": query, "limit": 3, **body},
                           headers=tenant.headers)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _ids(answer: dict[str, Any]) -> list[str]:
    return [o["id"] for o in answer["objects"]]


def test_common_words_fall_back_to_hybrid(client: TestClient,
                                          tenants: dict[str, Tenant]) -> None:
    x = tenants["x"]
    forced = _search(client, x, COMMON, mode="ppr", explain=True)
    seeds = {s["name"]: s for s in forced["explain"]["seeds"]}
    # the word is an entity: mode ppr seeds on it, but the question does not write it as a name
    assert "Birthplace" in seeds and seeds["Birthplace"]["strong"] is False
    assert forced["mode"] == "ppr" and forced["explain"]["subgraph"]["nodes"] > 0
    auto = _search(client, x, COMMON, mode="auto", explain=True)
    assert auto["mode"] == "hybrid" and auto["explain"]["subgraph"] is None
    assert not any(s["strong"] for s in auto["explain"]["seeds"])
    assert _ids(auto) == _ids(_search(client, x, COMMON))


def test_a_bridging_question_runs_ppr_from_its_names(client: TestClient,
                                                     tenants: dict[str, Tenant]) -> None:
    x = tenants["x"]
    hybrid = _search(client, x, QUESTION)
    auto = _search(client, x, QUESTION, mode="auto", explain=True)
    assert x.ids["bridge"] not in _ids(hybrid)
    assert auto["mode"] == "ppr"
    seeds = {s["name"]: s for s in auto["explain"]["seeds"]}
    assert seeds["Moonfall Harbor"]["strong"] is True
    assert all(s["strong"] for s in seeds.values())
    assert set(_ids(auto)[:2]) == {x.ids["film"], x.ids["bridge"]}
    hits = {h["id"]: h for h in auto["explain"]["hits"]}
    assert hits[x.ids["bridge"]]["ppr_rank"] is not None


def test_other_tenant_same_texts_gets_hybrid_and_its_own(client: TestClient,
                                                         tenants: dict[str, Tenant]) -> None:
    x, y = tenants["x"], tenants["y"]
    answer = _search(client, y, QUESTION, mode="auto", explain=True, limit=10)
    assert answer["mode"] == "hybrid" and answer["explain"]["seeds"] == []
    assert set(_ids(answer)) <= set(y.ids.values())
    mine = _search(client, x, QUESTION, mode="auto", limit=10)
    assert set(_ids(mine)) <= set(x.ids.values())
