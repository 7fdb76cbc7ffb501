"""The Tantivy lexical channel in the running pipeline: a published part reaches the index through
the read host's follower (the thread every API process runs) soon after its commit, and
`/v1/search` on LEXICAL_ENGINE=tantivy answers each tenant from its own index, finds
near-spellings, and refuses bad filters with a 4xx naming the field."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from pipeline.domain.read_model import Filters, Hit
from pipeline.lexical.searcher import TantivySearcher
from pipeline.postgres.pool import make_async_pool
from pipeline.retrieval.store.search import PgPartSearcher
from pipeline.settings import Settings
from pipeline.wiring.lexical_follower import ReplicaFollower
from tests.pipelineutil import Publisher, ingest, put

pytestmark = pytest.mark.stack


def _committed(settings: Settings, object_id: str) -> bool:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute("SELECT count(*) FROM objects WHERE id = %s", (object_id,)).fetchone()
    return bool(row and row[0])


async def _search_until_found(settings: Settings, ns: uuid.UUID, query: str,
                              attempts: int) -> tuple[list[Hit], int]:
    """Search the index until it answers (at most `attempts` tries, 50 ms apart): the hits, and
    how many tries it took."""
    pool = await make_async_pool(settings, max_size=2)
    try:
        index = TantivySearcher(settings.resolved_data_dir, settings.generation,
                                PgPartSearcher(pool).query_lexemes)
        for attempt in range(1, attempts + 1):
            hits = await index.search_lexical(ns, query, Filters(), [], 10)
            if hits:
                return hits, attempt
            await asyncio.sleep(0.05)
        return [], attempts
    finally:
        await pool.close()


def test_a_published_part_is_searchable_after_its_commit(
        procs: dict[str, Any], catalog: Settings, publisher: Publisher) -> None:
    ns, other = uuid.uuid4(), uuid.uuid4()
    event = put(ns, kind="note", title="Freshness probe", content="the narwhal ledger",
                properties={"author": "kim"})
    oid = event["data"]["id"]
    follower = ReplicaFollower(catalog)  # this test is the read host
    follower.start()
    try:
        publisher.send(event, key=oid)
        for _ in range(600):  # the consumer's commit first (bounded: 30 s)
            if _committed(catalog, oid):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the put never committed")
        # then the host's follower (polling the log) and the reader's reload
        hits, _ = asyncio.run(_search_until_found(catalog, ns, "narwhal", attempts=200))
    finally:
        follower.stop()
    assert len(hits) == 1
    assert asyncio.run(_search_until_found(catalog, other, "narwhal", attempts=1))[0] == []


def _tenant_events(ns: uuid.UUID, ids: dict[str, str]) -> list[dict[str, Any]]:
    return [
        put(ns, id=ids["company"], kind="company", title="Okapi Logistics",
            summary="Cold-chain freight forwarding.", properties={"industry": "logistics"}),
        put(ns, id=ids["deal"], kind="deal", title="Okapi cold-chain renewal",
            summary="Renewal of the reefer contract.", properties={"stage": "prospect"}),
        put(ns, id=ids["note"], kind="note", title="Call notes",
            content="The okapi team wants reefer telemetry before the renewal.",
            properties={"author": "jordan"}),
    ]


@pytest.fixture(scope="module")
def tantivy_client(catalog: Settings) -> Iterator[tuple[TestClient, dict[str, Any]]]:
    """Two tenants with the same objects (B with one more), and an API on LEXICAL_ENGINE
    tantivy."""
    tenants: dict[str, Any] = {}
    for name in ("a", "b"):
        ns = uuid.uuid4()
        ids = {k: str(uuid.uuid4()) for k in ("company", "deal", "note")}
        events = _tenant_events(ns, ids)
        if name == "b":
            ids["only_b"] = str(uuid.uuid4())
            events.append(put(ns, id=ids["only_b"], kind="company", title="Okapi Only-B"))
        ingest(catalog, events)
        tenants[name] = {"ns": ns, "ids": ids, "key": f"key-{name}-{uuid.uuid4().hex[:8]}"}
    settings = catalog.model_copy(update={
        "lexical_engine": "tantivy",
        "api_keys": {t["key"]: [str(t["ns"])] for t in tenants.values()}})
    with TestClient(create_app(settings)) as client:
        yield client, tenants


def _ids(page: dict[str, Any]) -> list[str]:
    return [o["id"] for o in page["objects"]]


def test_search_api_on_tantivy_keeps_tenants_apart(
        tantivy_client: tuple[TestClient, dict[str, Any]]) -> None:
    client, tenants = tantivy_client
    a, b = tenants["a"], tenants["b"]
    for tenant in (a, b):
        page = client.post("/v1/search", json={"query": "okapi renewal", "explain": True},
                           headers={"Authorization": f"Bearer {tenant['key']}"})
        assert page.status_code == 200, page.text
        found = _ids(page.json())
        assert set(found) <= set(tenant["ids"].values())
        assert tenant["ids"]["deal"] in found
    b_page = client.post("/v1/search", json={"query": "okapi", "limit": 50},
                         headers={"Authorization": f"Bearer {b['key']}"}).json()
    assert b["ids"]["only_b"] in _ids(b_page)
    a_page = client.post("/v1/search", json={"query": "okapi", "limit": 50},
                         headers={"Authorization": f"Bearer {a['key']}"}).json()
    assert b["ids"]["only_b"] not in _ids(a_page)


def test_search_api_on_tantivy_filters_and_near_spellings(
        tantivy_client: tuple[TestClient, dict[str, Any]]) -> None:
    client, tenants = tantivy_client
    a = tenants["a"]
    headers = {"Authorization": f"Bearer {a['key']}"}
    deals = client.post("/v1/search", json={"query": "okapi", "filters": {"kind": "deal"}},
                        headers=headers).json()
    assert _ids(deals) == [a["ids"]["deal"]]
    staged = client.post("/v1/search", json={"query": "okapi",
                                             "filters": {"stage": ["won", "prospect"]}},
                         headers=headers).json()
    assert _ids(staged) == [a["ids"]["deal"]]
    # a misspelling the index does not know: the fuzzy channel finds the reefer rows
    near = client.post("/v1/search", json={"query": "refeer", "limit": 50, "explain": True},
                       headers=headers).json()
    assert {a["ids"]["note"], a["ids"]["deal"]} <= set(_ids(near))
    bad = client.post("/v1/search", json={"query": "okapi", "filters": {"author": "sam"}},
                      headers=headers)
    assert bad.status_code == 422
    assert bad.json()["error"]["field"] == "filters.author"
    exact = client.post("/v1/find_exact", json={"query": "Okapi cold-chain renewal"},
                        headers=headers)
    assert exact.status_code == 200, exact.text
    assert _ids(exact.json())[0] == a["ids"]["deal"]
