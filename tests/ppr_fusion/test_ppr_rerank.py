"""PPR as the re-ranker of the hybrid list, objects scored by all their rows, and a name
written with a possessive as a seed (issue 11, B3), through the API on the real stack.

The question names one entity, "Zorvex Labs". Two parts of the long "twin" document name it,
one part of the short "single" document names it together with an entity nothing else names
("Hollin Quay"), and a distractor and a lookalike repeat the question's words without naming
anything (the lookalike, all the question's words, tops the hybrid list). The
walk from Zorvex Labs gives each twin part less than the single part (whose other entity sends
its share back), but the twin's two parts together more: an object scores the walk's
probability of standing on any of its rows. Mode auto orders the hybrid list's best objects by
that score when `ppr_rerank_depth` is set, so the twin comes first, the single second (the
hybrid list ranks the single higher, and so does the raw best-row score: RRF of raw PPR puts it
first), then the lookalike and the distractor (never reached by the walk), wherever the hybrid
list put them. Ranked per unit of degree (`degree_normalised`, the default), a twin part,
naming Zorvex Labs alone, outranks the single's part, and RRF puts the twin first.
"Hollin Quay's" seeds Hollin Quay. Tenant B holds the same texts without entities: auto
answers it hybrid, with B's objects alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from pipeline.entities.names import normalise
from pipeline.settings import Settings
from pipeline.wiring.services import PPR, SEARCH
from tests.apiutil import Tenant, read_side
from tests.entities.holdutil import hold_extraction
from tests.pipelineutil import ingest, put

QUESTION = "Who founded Zorvex Labs?"
# Over the 200-token chunk size: two parts, each naming Zorvex Labs.
FILLER = " ".join(f"ledger{i} entry" for i in range(120))
DOCS = {
    "twin": ("Annual ledger", f"Zorvex Labs opened its books. {FILLER}. {FILLER}. "
                              "The books closed at Zorvex Labs."),
    "single": ("Quay note", "Zorvex Labs rents a shed at Hollin Quay."),
    "distractor": ("Founders", "Who founded the labs? Who founded them, and who founded more?"),
    "lookalike": ("Zorvex Labs founders", "Who founded Zorvex Labs? Nobody says who founded "
                                          "Zorvex Labs."),
    "other": ("Weather", "Rain fell on the hills all week."),
}
MENTIONS = {"twin": ["Zorvex Labs"], "single": ["Zorvex Labs", "Hollin Quay"]}


def _fill_entities(settings: Settings, tenant: Tenant) -> None:
    """Entities and mentions of every part naming them, as the extraction stage would write."""
    ns = tenant.namespace
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute("UPDATE entity_extraction SET status = 'done', extracted_hash = text_hash"
                     " WHERE namespace_id = %s", (ns,))
        mentions: dict[str, list[tuple[uuid.UUID, int]]] = {}
        for doc, names in MENTIONS.items():
            for row, content in conn.execute(
                    "SELECT id, content FROM objects WHERE namespace_id = %s AND parent_id = %s"
                    " ORDER BY id", (ns, tenant.ids[doc])).fetchall():
                for name in names:
                    if name in str(content):
                        mentions.setdefault(name, []).append((row, str(content).index(name)))
        for name, rows in mentions.items():
            entity = uuid.uuid5(ns, normalise(name))
            conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label, part_count)"
                         " VALUES (%s, %s, %s, %s, 'NAME', %s)",
                         (entity, ns, name, normalise(name), len(rows)))
            for row, start in rows:
                conn.execute(
                    "INSERT INTO mentions (row_id, field, start_pos, end_pos, namespace_id,"
                    " entity_id, label, text) VALUES (%s, 'content', %s, %s, %s, %s, 'NAME',"
                    " %s)", (row, start, start + len(name), ns, entity, name))
    assert len(mentions["Zorvex Labs"]) == 3, "the twin's two parts and the single's part"


@pytest.fixture(scope="module")
def tenants(catalog: Settings) -> dict[str, Tenant]:
    """Tenant A (entities filled by SQL) and B (the same documents, no entities)."""
    out = {}
    for name in ("a", "b"):
        ns = uuid.uuid4()
        ids = {doc: str(uuid.uuid4()) for doc in DOCS}
        ingest(catalog, [put(ns, id=ids[doc], kind="note", title=title, content=text)
                         for doc, (title, text) in DOCS.items()])
        tenant = Tenant(ns, f"key-rerank-{name}-{uuid.uuid4().hex[:8]}", ids)
        hold_extraction(catalog, tenant.namespace)
        if name == "a":
            _fill_entities(catalog, tenant)
        out[name] = tenant
    return out


# a corpus of a few rows: no entity is a hub, and the walk starts from Zorvex Labs alone (the
# hybrid list's rows as weak seeds would reach the distractor too)
TINY = {"hub_min_rows": 10, "passage_seed_weight": 0.0}


def _settings(catalog: Settings, tenants: dict[str, Tenant]) -> Settings:
    return catalog.model_copy(update={
        "api_keys": {t.key: [str(t.namespace)] for t in tenants.values()}, "decay_lambda": 0.0})


@pytest.fixture(scope="module")
def client(catalog: Settings, tenants: dict[str, Tenant]) -> Iterator[TestClient]:
    with read_side(ppr=TINY, search={"ppr_rerank_depth": 30}), TestClient(
            create_app(_settings(catalog, tenants))) as test_client:
        yield test_client


def _search(client: TestClient, tenant: Tenant, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/search", json={"query": QUESTION, "limit": 4, **body},
                           headers=tenant.headers)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_auto_orders_the_hybrid_list_by_the_objects_ppr_score(
        client: TestClient, tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    hybrid = [o["id"] for o in _search(client, a)["objects"]]
    answer = _search(client, a, mode="auto", explain=True)
    ids = [o["id"] for o in answer["objects"]]
    assert answer["mode"] == "ppr"
    assert hybrid[0] == a.ids["lookalike"]
    assert hybrid.index(a.ids["single"]) < hybrid.index(a.ids["twin"])
    assert ids[:2] == [a.ids["twin"], a.ids["single"]]
    assert set(ids[2:]) == {a.ids["lookalike"], a.ids["distractor"]}
    assert set(ids) <= set(hybrid), "a re-rank adds nothing the hybrid list lacks"
    hits = {h["id"]: h for h in answer["explain"]["hits"]}
    assert hits[a.ids["twin"]]["ppr_rank"] == 1 and hits[a.ids["single"]]["ppr_rank"] == 2
    assert hits[a.ids["distractor"]]["ppr_rank"] is None
    assert answer["explain"]["subgraph"]["rows"] == 3  # the twin's two parts, the single's one


def test_other_tenant_same_texts_no_entities_gets_hybrid(
        client: TestClient, tenants: dict[str, Tenant]) -> None:
    a, b = tenants["a"], tenants["b"]
    hybrid = _search(client, b)
    auto = _search(client, b, mode="auto")
    assert auto["mode"] == "hybrid"
    assert [o["id"] for o in auto["objects"]] == [o["id"] for o in hybrid["objects"]]
    assert set(b.ids.values()) >= {o["id"] for o in auto["objects"]}
    assert not set(a.ids.values()) & {o["id"] for o in auto["objects"]}


def test_the_default_fusion_stays_rrf_of_best_rows(catalog: Settings,
                                                  tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    settings = _settings(catalog, tenants)
    assert SEARCH.ppr_rerank_depth == 0 and PPR.degree_normalised
    assert SEARCH.ppr_list_weight == 0.8
    with read_side(ppr=TINY), TestClient(create_app(settings)) as default_client:
        answer = _search(default_client, a, mode="auto", explain=True)
    ids = [o["id"] for o in answer["objects"]]
    assert answer["mode"] == "ppr"
    # per unit of degree, a twin part (naming Zorvex Labs alone) outranks the single's part
    # (naming it beside Hollin Quay, which hands its share back): the twin leads PPR's list
    hits = {h["id"]: h for h in answer["explain"]["hits"]}
    assert hits[a.ids["twin"]]["ppr_rank"] == 1 and hits[a.ids["single"]]["ppr_rank"] == 2
    assert ids.index(a.ids["twin"]) < ids.index(a.ids["single"])


def test_raw_ppr_ranks_the_single_part_first(catalog: Settings,
                                             tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    settings = _settings(catalog, tenants)
    with read_side(ppr={**TINY, "degree_normalised": False}, search={"ppr_list_weight": 1.0}
                   ), TestClient(create_app(settings)) as raw_client:
        answer = _search(raw_client, a, mode="auto", explain=True)
    ids = [o["id"] for o in answer["objects"]]
    hits = {h["id"]: h for h in answer["explain"]["hits"]}
    assert hits[a.ids["single"]]["ppr_rank"] == 1 and hits[a.ids["twin"]]["ppr_rank"] == 2
    assert ids.index(a.ids["single"]) < ids.index(a.ids["twin"])


def test_a_possessive_name_seeds_its_entity(client: TestClient,
                                            tenants: dict[str, Tenant]) -> None:
    a, b = tenants["a"], tenants["b"]
    answer = _search(client, a, query="What stands at Hollin Quay's edge?", mode="auto",
                     explain=True)
    assert answer["mode"] == "ppr"
    assert [(s["name"], s["text"], s["strong"]) for s in answer["explain"]["seeds"]] == [
        ("Hollin Quay", "Hollin Quay", True)]
    assert answer["objects"][0]["id"] == a.ids["single"]
    other = _search(client, b, query="What stands at Hollin Quay's edge?", mode="auto")
    assert other["mode"] == "hybrid"  # A's entity is no seed of B's
    assert not set(a.ids.values()) & {o["id"] for o in other["objects"]}
