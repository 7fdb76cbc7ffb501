"""PPR retrieval through the API on the real stack: `mode` auto finds the bridging passage that
hybrid misses, `explain` says how, a hub is dropped, and a second tenant with the same texts but
no entities gets hybrid and never the first tenant's data.

Tenant A's entity layer is filled with SQL (what the extraction stage writes: entities with
their live row counts, mentions of part rows), so those tests exercise retrieval alone; tenant
C's comes from the real extraction stage with the default (heuristic) extractor.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from pipeline.entities.names import normalise
from pipeline.settings import Settings
from tests.apiutil import Tenant, api_client, read_side
from tests.entities.holdutil import extract_now, hold_extraction
from tests.pipelineutil import ingest, put

# The question needs two passages: "Moonfall Harbor" names its director, and only the
# director's own passage names the country; that passage shares no word with the question.
QUESTION = "Which nation is the birthplace of the person who directed the film Moonfall Harbor?"
DOCS = {
    "film": ("Moonfall Harbor", "Moonfall Harbor is a drama directed by Elara Vantreck. "
             "Corvid Studio released it."),
    "bridge": ("Elara Vantreck", "Elara Vantreck grew up in Quillon, a river town of Ostravia, "
               "and joined Corvid Studio."),
    "d1": ("Birthplace registry", "The birthplace of a person is recorded by the nation where "
           "the person was born, says the registry."),
    "d2": ("Nation films", "A nation directed its film person to the harbor birthplace; the film "
           "was directed by the nation."),
    "d3": ("Harbor film person", "The harbor film was directed by a person whose birthplace "
           "is a nation of harbors."),
    "d4": ("Directed nation", "Which person directed which film of which nation is a question "
           "of birthplace."),
    "s1": ("Corvid Studio lot", "Corvid Studio keeps a lot by the sea."),
    "s2": ("Corvid Studio archive", "Corvid Studio archives its reels."),
    "s3": ("Corvid Studio staff", "Corvid Studio employs carpenters."),
    "s4": ("Corvid Studio canteen", "Corvid Studio serves soup at noon."),
}
# Entities each document's part names (the Corvid Studio hub is in more than 10 % of the rows).
MENTIONS = {
    "film": ["Moonfall Harbor", "Elara Vantreck", "Corvid Studio"],
    "bridge": ["Elara Vantreck", "Quillon", "Ostravia", "Corvid Studio"],
    "s1": ["Corvid Studio"], "s2": ["Corvid Studio"], "s3": ["Corvid Studio"],
    "s4": ["Corvid Studio"],
}


def _fill_entities(settings: Settings, tenant: Tenant) -> None:
    """Entities and mentions of the documents' parts, as the extraction stage would write;
    the rows are marked extracted, so no stage of the session's pipeline rewrites them."""
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute("UPDATE entity_extraction SET status = 'done', extracted_hash = text_hash"
                     " WHERE namespace_id = %s", (tenant.namespace,))
        parts = {str(r[1]): r[0] for r in conn.execute(
            "SELECT id, parent_id FROM objects WHERE namespace_id = %s"
            " AND parent_id IS NOT NULL", (tenant.namespace,))}
        rows_of: dict[str, list[uuid.UUID]] = {}
        for doc, names in MENTIONS.items():
            for name in names:
                rows_of.setdefault(name, []).append(parts[tenant.ids[doc]])
        for name, rows in rows_of.items():
            entity = uuid.uuid5(tenant.namespace, normalise(name))
            conn.execute(
                "INSERT INTO entities (id, namespace_id, name, norm, label, part_count)"
                " VALUES (%s, %s, %s, %s, 'NAME', %s)",
                (entity, tenant.namespace, name, normalise(name), len(rows)))
            for row in rows:
                content = conn.execute("SELECT content FROM objects WHERE id = %s",
                                       (row,)).fetchone()
                assert content is not None
                start = str(content[0]).index(name)
                conn.execute(
                    "INSERT INTO mentions (row_id, field, start_pos, end_pos, namespace_id,"
                    " entity_id, label, text) VALUES (%s, 'content', %s, %s, %s, %s, 'NAME',"
                    " %s)", (row, start, start + len(name), tenant.namespace, entity, name))


@pytest.fixture(scope="module")
def tenants(catalog: Settings) -> dict[str, Tenant]:
    """Tenant A (entities filled by SQL), B (the same documents, no entities) and C (entities
    from the real extraction stage)."""
    out = {}
    for name in ("a", "b", "c"):
        ns = uuid.uuid4()
        ids = {doc: str(uuid.uuid4()) for doc in DOCS}
        ingest(catalog, [put(ns, id=ids[doc], kind="note", title=title, content=text)
                         for doc, (title, text) in DOCS.items()])
        tenant = Tenant(ns, f"key-ppr-{name}-{uuid.uuid4().hex[:8]}", ids)
        if name in ("a", "b"):
            hold_extraction(catalog, tenant.namespace)
        if name == "a":
            _fill_entities(catalog, tenant)
        if name == "c":
            extract_now(catalog, ids.values())
        out[name] = tenant
    return out


@pytest.fixture(scope="module")
def client(catalog: Settings, tenants: dict[str, Tenant]) -> Iterator[TestClient]:
    # this corpus (20 live rows: a hub limit of 2 by the fraction) is far smaller than the
    # default floor of 20 rows: 3 keeps Elara Vantreck (part, part, title) and drops Corvid Studio
    # the walk from entities alone: the hybrid list's distractors as weak seeds would outweigh
    # one bridge in a corpus of ten passages
    with read_side(ppr={"hub_min_rows": 3, "passage_seed_weight": 0.0}), api_client(
            catalog, tenants.values(), decay_lambda=0.0) as test_client:
        yield test_client


def _search(client: TestClient, tenant: Tenant, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/search", json={"query": QUESTION, **body},
                           headers=tenant.headers)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _ids(answer: dict[str, Any]) -> list[str]:
    return [o["id"] for o in answer["objects"]]


def test_auto_finds_the_bridging_passage_that_hybrid_misses(
        client: TestClient, tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    hybrid = _search(client, a, limit=3)
    auto = _search(client, a, limit=3, mode="auto")
    assert a.ids["bridge"] not in _ids(hybrid)
    assert hybrid["mode"] is None  # today's answer, unchanged
    assert auto["mode"] == "ppr"
    assert set(_ids(auto)[:2]) == {a.ids["film"], a.ids["bridge"]}
    bridge = next(o for o in auto["objects"] if o["id"] == a.ids["bridge"])
    assert bridge["evidence"], "the bridging passage comes with its part as evidence"


def test_entities_from_the_extraction_stage_bridge_too(
        client: TestClient, tenants: dict[str, Tenant]) -> None:
    c = tenants["c"]
    hybrid = _search(client, c, limit=3)
    auto = _search(client, c, limit=3, mode="auto", explain=True)
    assert c.ids["bridge"] not in _ids(hybrid)
    assert auto["mode"] == "ppr"
    assert "Moonfall Harbor" in {s["name"] for s in auto["explain"]["seeds"]}
    assert set(_ids(auto)[:2]) == {c.ids["film"], c.ids["bridge"]}


def test_explain_names_seeds_hubs_subgraph_and_ranks(
        client: TestClient, tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    answer = _search(client, a, limit=3, mode="auto",
                     query=QUESTION.replace("film", "Corvid Studio film"), explain=True)
    explain = answer["explain"]
    seeds = {s["name"]: s for s in explain["seeds"]}
    assert set(seeds) == {"Moonfall Harbor"}
    assert seeds["Moonfall Harbor"]["weight"] == pytest.approx(1.0)  # one row names it
    assert seeds["Moonfall Harbor"]["method"] == "exact"
    assert [h["name"] for h in explain["hubs_dropped"]] == ["Corvid Studio"]
    graph = explain["subgraph"]
    # 3 hops: Moonfall Harbor -> the film's part -> Elara Vantreck -> the bridging part (its
    # other entities would be a 4th hop; Corvid Studio, a hub, is left out)
    assert graph == {"hops": 3, "nodes": 4, "entities": 2, "rows": 2, "edges": 3}
    assert explain["iterations"] >= 1 and explain["truncated"] is False
    hits = {h["id"]: h for h in explain["hits"]}
    assert list(hits) == _ids(answer)
    bridge = hits[a.ids["bridge"]]
    assert bridge["ppr_rank"] is not None and bridge["fused_score"] > 0
    assert bridge["first_stage_rank"] is None or bridge["first_stage_rank"] > 3
    # Corvid Studio is a hub: its rows did not enter the subgraph
    assert not {a.ids[d] for d in ("s1", "s2", "s3", "s4")} & set(_ids(answer))


def test_auto_without_a_usable_seed_is_hybrid(client: TestClient,
                                             tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    query = "soup at noon"
    hybrid = _search(client, a, query=query)
    auto = _search(client, a, query=query, mode="auto", explain=True)
    assert auto["mode"] == "hybrid"
    assert _ids(auto) == _ids(hybrid)
    assert auto["explain"]["seeds"] == [] and auto["explain"]["subgraph"] is None
    forced = _search(client, a, query=query, mode="ppr")
    assert forced["mode"] == "ppr" and set(_ids(forced)) == set(_ids(hybrid))


def test_other_tenant_same_texts_no_entities(client: TestClient,
                                            tenants: dict[str, Tenant]) -> None:
    a, b = tenants["a"], tenants["b"]
    answer = _search(client, b, limit=10, mode="auto", explain=True)
    assert answer["mode"] == "hybrid"  # A's entities are not B's seeds
    assert answer["explain"]["seeds"] == []
    assert set(_ids(answer)) <= set(b.ids.values())
    forced = _search(client, b, limit=10, mode="ppr", explain=True)
    assert forced["explain"]["subgraph"]["nodes"] == 0
    assert set(_ids(forced)) <= set(b.ids.values())
    mine = _search(client, a, limit=10, mode="ppr")
    assert set(_ids(mine)) <= set(a.ids.values())


def test_bad_mode_is_a_422_naming_the_field(client: TestClient,
                                            tenants: dict[str, Tenant]) -> None:
    response = client.post("/v1/search", json={"query": QUESTION, "mode": "pagerank"},
                           headers=tenants["a"].headers)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "mode"
    exact = client.post("/v1/find_exact", json={"query": QUESTION, "mode": "auto"},
                        headers=tenants["a"].headers)
    assert exact.status_code == 422 and exact.json()["error"]["field"] == "mode"
