"""Through the API (PPR_WALK=snapshot, the default): a namespace's first PPR search is walked in
SQL while its snapshot builds in the background, later ones on the snapshot, with the same
answer and explain; each tenant gets its own; `/metrics` reports what the process holds.
PPR_WALK=sql never builds one."""

from __future__ import annotations

import time
from typing import Any

from fastapi.testclient import TestClient

from pipeline.settings import Settings
from tests.apiutil import api_client
from tests.entities.test_ppr import (
    QUESTION,
    Tenant,
    client as client,  # the fixtures, shared
    tenants as tenants,
)


def _search(client: TestClient, tenant: Tenant) -> dict[str, Any]:
    response = client.post("/v1/search", json={"query": QUESTION, "mode": "auto", "limit": 5,
                                                "explain": True}, headers=tenant.headers)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _until_snapshot(client: TestClient, tenant: Tenant) -> dict[str, Any]:
    deadline = time.monotonic() + 60  # a hang becomes a failure, nothing is timed
    while True:
        answer = _search(client, tenant)
        if answer["explain"]["walk_source"] == "snapshot":
            return answer
        assert time.monotonic() < deadline, "the snapshot never answered"
        time.sleep(0.1)


def _without_source(answer: dict[str, Any]) -> dict[str, Any]:
    explain = {k: v for k, v in answer["explain"].items()
               if k not in ("walk_source", "snapshot_age")}
    return {"objects": [(o["id"], o["score"]) for o in answer["objects"]], "explain": explain}


def test_first_search_walks_in_sql_then_the_snapshot_answers_the_same(
        client: TestClient, tenants: dict[str, Tenant]) -> None:
    for name in ("a", "c"):  # two tenants, each its own snapshot
        tenant = tenants[name]
        first = _search(client, tenant)
        assert first["mode"] == "ppr"
        assert first["explain"]["walk_source"] == "sql"  # nobody waited for the build
        assert first["explain"]["snapshot_age"] is None
        later = _until_snapshot(client, tenant)
        assert isinstance(later["explain"]["snapshot_age"], float)
        assert _without_source(later) == _without_source(first)
        assert {o["id"] for o in later["objects"]} <= set(tenant.ids.values())
    metrics = client.get("/metrics").text
    assert 'brainstream_ppr_snapshot{measure="namespaces"} 2.0' in metrics
    for idle in ("building", "queued", "refused"):
        assert f'brainstream_ppr_snapshot{{measure="{idle}"}} 0.0' in metrics


def test_ppr_walk_sql_never_builds_a_snapshot(
        catalog: Settings, tenants: dict[str, Tenant]) -> None:
    tenant = tenants["c"]
    with api_client(catalog, [tenant], ppr_walk="sql") as test_client:
        for _ in range(3):
            assert _search(test_client, tenant)["explain"]["walk_source"] == "sql"
            time.sleep(0.2)
        assert test_client.app.state.services.ppr_snapshots is None
