"""Issue 10, item 9 and a new relation type's first link: graph finds that other tenants and
narrow filters cannot empty.

The graph's vector index is shared by every namespace and cannot pre-filter: a tenant with many
near-duplicates of a query must not crowd another tenant's match out of `find_objects`. Filters
apply after hydration: `find_objects` asks for more candidates until the page is full, and says
`truncated` when its bound stopped it first. A relation type whose first edge was just written
is findable by `find_links` at once (capabilities are re-read on a miss).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from pipeline.graph.falkordb import reader as graph_reader
from pipeline.graph.falkordb.reader import FalkorGraphReader
from pipeline.graph.falkordb.schema import connect, wait_operational
from pipeline.settings import Settings
from pipeline.wiring import services
from tests.pipelineutil import envelope, ingest, put

pytestmark = pytest.mark.stack

VECTOR_CAP = 64


def _tenant() -> tuple[uuid.UUID, str]:
    return uuid.uuid4(), f"find-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def _client(settings: Settings, tenants: list[tuple[uuid.UUID, str]], *,
            vector_cap: int | None = None, max_candidates: int | None = None,
            capability_ttl: float | None = None) -> Iterator[TestClient]:
    """The API keyed for `tenants`, with the graph reader's and entity find's bounds changed."""
    keys = {key: [str(ns)] for ns, key in tenants}
    with pytest.MonkeyPatch.context() as patch:
        if vector_cap is not None:
            patch.setattr(graph_reader, "DEFAULT_VECTOR_CAP", vector_cap)
        if capability_ttl is not None:
            patch.setattr(graph_reader, "CAPABILITY_TTL", capability_ttl)
        if max_candidates is not None:
            patch.setattr(services, "FIND", replace(services.FIND, max_candidates=max_candidates))
        with TestClient(create_app(settings.model_copy(update={"api_keys": keys}))) as client:
            yield client


def _find(client: TestClient, key: str, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/find_objects", json=body,
                           headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200, response.text
    return dict(response.json())


@pytest.fixture(scope="module")
def crowd(catalog: Settings) -> Iterator[tuple[TestClient, dict[str, Any]]]:
    """B: many near-duplicates of the query; A: one object sharing no word with it."""
    a, b = _tenant(), _tenant()
    word = f"crane{uuid.uuid4().hex[:6]}"
    query = f"harbor {word} logistics"
    ingest(catalog, [put(b[0], kind="company", title=query) for _ in range(VECTOR_CAP + 36)])
    mine = put(a[0], kind="company", title="Shipping port equipment")
    ingest(catalog, [mine])
    with _client(catalog, [a, b], vector_cap=VECTOR_CAP) as client:
        yield client, {"a": a, "b": b, "query": query, "mine": mine["data"]["id"]}


def test_near_duplicates_of_another_tenant_cannot_crowd_a_match_out(
        crowd: tuple[TestClient, dict[str, Any]]) -> None:
    client, ctx = crowd
    (_, key_a), (_, key_b) = ctx["a"], ctx["b"]
    found = _find(client, key_a, query=ctx["query"], limit=5)
    assert [o["id"] for o in found["objects"]] == [ctx["mine"]]
    assert found["truncated"] is False
    theirs = _find(client, key_b, query=ctx["query"], limit=100)
    assert ctx["mine"] not in [o["id"] for o in theirs["objects"]]


@pytest.fixture(scope="module")
def ranked(catalog: Settings) -> dict[str, Any]:
    """62 deals with one title: 60 `prospect`, then 2 `won` whose ids rank them last (equal
    scores go by id in both channels)."""
    ns, key = _tenant()
    title = f"Zephyr {uuid.uuid4().hex[:6]} rollout"
    events = [put(ns, kind="deal", title=title, properties={"stage": "prospect"})
              for _ in range(60)]
    won = [f"ffffffff-ffff-4fff-8fff-{uuid.uuid4().hex[:12]}" for _ in range(2)]
    events += [put(ns, id=i, kind="deal", title=title, properties={"stage": "won"}) for i in won]
    ingest(catalog, events)
    return {"tenant": (ns, key), "title": title, "won": sorted(won)}


def test_a_narrow_filter_finds_matches_ranked_below_the_first_candidates(
        catalog: Settings, ranked: dict[str, Any]) -> None:
    ns, key = ranked["tenant"]
    with _client(catalog, [(ns, key)]) as client:
        found = _find(client, key, query=ranked["title"], filters={"stage": "won"}, limit=10)
        unfiltered = _find(client, key, query=ranked["title"], limit=10)
    assert sorted(o["id"] for o in found["objects"]) == ranked["won"]
    assert (found["has_more"], found["truncated"]) == (False, False)
    assert unfiltered["has_more"] and not unfiltered["truncated"]
    assert not set(ranked["won"]) & {o["id"] for o in unfiltered["objects"]}


def test_a_bound_that_cuts_the_search_short_says_so(catalog: Settings,
                                                    ranked: dict[str, Any]) -> None:
    ns, key = ranked["tenant"]
    with _client(catalog, [(ns, key)], max_candidates=50) as client:
        found = _find(client, key, query=ranked["title"], filters={"stage": "won"}, limit=10)
    assert found["objects"] == [] and found["truncated"] is True


def test_a_new_relation_types_first_link_is_findable_at_once(catalog: Settings) -> None:
    ns, key = _tenant()
    old, new = put(ns, kind="company", title="Old policy"), put(ns, kind="company",
                                                                 title="New policy")
    ingest(catalog, [old, new])
    relation = f"supersedes_{uuid.uuid4().hex[:8]}"
    body = {"relation_type": relation, "query": "replaced"}
    headers = {"Authorization": f"Bearer {key}"}
    with _client(catalog, [(ns, key)], capability_ttl=0) as client:
        before = client.post("/v1/find_links", json=body, headers=headers)
        assert before.status_code == 200 and before.json()["objects"] == []
        ingest(catalog, [envelope("link.put", ns, {
            "from": new["data"]["id"], "to": old["data"]["id"], "relation_type": relation,
            "meta": {"note": "replaced by the newer policy"}})])
        wait_operational(connect(catalog).select_graph(catalog.graph_name), timeout=30)
        after = client.post("/v1/find_links", json=body, headers=headers).json()
    assert [o["id"] for o in after["objects"]] == [old["data"]["id"]]


def test_capability_misses_are_rate_limited(catalog: Settings) -> None:
    async def misses(interval: float) -> int:
        reader = FalkorGraphReader.from_settings(catalog, capability_ttl=interval)
        try:
            for _ in range(3):
                assert await reader.find_edges(uuid.uuid4(), "never_written", "x", 5) == []
            return reader.round_trips
        finally:
            await reader.aclose()

    assert asyncio.run(misses(3600.0)) == 1  # read once; the misses after wait their turn
    assert asyncio.run(misses(0.0)) == 4  # the first read, then one per miss
