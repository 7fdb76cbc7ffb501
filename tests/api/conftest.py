"""The read API over data written by the real write path (apply, embed, relay in-process)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from pipeline.settings import Settings
from tests.apiutil import Tenant, api_keys
from tests.pipelineutil import envelope, ingest, put

NOTE = ("# Kickoff\n\nAcme wants the pilot in the Rotterdam site first.\n\n"
        "Budget owner is the COO; procurement needs a security review before signature.\n\n"
        "Next step: send the SOC 2 report and a draft order form.")


def _events(ns: uuid.UUID, ids: dict[str, str]) -> list[dict[str, Any]]:
    return [
        put(ns, id=ids["company"], kind="company", title="Acme Robotics",
            summary="Industrial robot arms for warehouses.",
            properties={"industry": "robotics", "public": False}),
        put(ns, id=ids["deal"], kind="deal", title="Acme warehouse rollout",
            summary="Forty arms across three sites.",
            properties={"stage": "prospect", "amount": 420000}),
        put(ns, id=ids["note"], kind="note", title="Kickoff call with Acme", content=NOTE,
            content_type="text/markdown", properties={"author": "jordan"}),
        put(ns, id=ids["ghost"], kind="company", title="Ghost Warehouse Corp",
            summary="Warehouses and robot arms, deleted."),
        envelope("link.put", ns, {"from": ids["deal"], "to": ids["company"],
                                  "relation_type": "buyer",
                                  "meta": {"note": "Acme is the buying entity",
                                           "status": "active", "confidence": 0.95}}),
        envelope("link.put", ns, {"from": ids["note"], "to": ids["deal"],
                                  "relation_type": "about",
                                  "meta": {"note": "kickoff notes for the rollout deal"}}),
        envelope("link.put", ns, {"from": ids["deal"], "to": ids["ghost"],
                                  "relation_type": "buyer", "meta": {"note": "ghost buyer"}}),
        envelope("object.soft_delete", ns, {"id": ids["ghost"]}),
    ]


@pytest.fixture(scope="session")
def tenants(catalog: Settings) -> dict[str, Tenant]:
    """Two tenants with the same titles and content (and B with one more object)."""
    out = {}
    for name in ("a", "b"):
        ns = uuid.uuid4()
        ids = {k: str(uuid.uuid4()) for k in ("company", "deal", "note", "ghost")}
        events = _events(ns, ids)
        if name == "b":
            ids["only_b"] = str(uuid.uuid4())
            events.append(put(ns, id=ids["only_b"], kind="company", title="Only in B Robotics"))
        ingest(catalog, events)
        out[name] = Tenant(ns, f"key-{name}-{uuid.uuid4().hex[:8]}", ids)
    return out


@pytest.fixture(scope="session")
def api_settings(catalog: Settings, tenants: dict[str, Tenant]) -> Settings:
    keys = api_keys(tenants.values(), "admin")  # every route is tested, writes and curation
    keys["key-both"] = [str(tenants["a"].namespace), str(tenants["b"].namespace)]
    return catalog.model_copy(update={"api_keys": keys})


@pytest.fixture(scope="session")
def client(api_settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(api_settings)) as test_client:
        yield test_client
