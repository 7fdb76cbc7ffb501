"""Memory search's recall rules on the real pipeline (messages published, extracted by the
workers; searched through the API), two tenants with sessions and speakers of the same names:
a query naming a speaker finds that speaker's turn though only the other speaker's text holds
the name; a query's "yesterday" finds the turn said yesterday; neither reaches the other
tenant's messages; the defaults' answer shape is unchanged."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from pipeline.settings import Settings
from tests.memory.conftest import Tenant
from tests.memory.memutil import add, message, send, session_put
from tests.memory.workutil import extracted
from tests.pipelineutil import Proc, Publisher, wait_for

pytestmark = pytest.mark.stack
USER = f"recall-{uuid.uuid4().hex[:8]}"
TODAY = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def _at(days_ago: int) -> str:
    return (TODAY - timedelta(days=days_ago) + timedelta(hours=12)).isoformat()


# (speaker name in metadata or None, role, content, days ago)
TURNS = [
    ("Caroline", "user", "I finally started a pottery class, shaping clay calms me.", 30),
    ("Melanie", "assistant", "Caroline, pottery sounds fun! My pottery bowl broke, "
                             "I am done with pottery, Caroline.", 30),
    (None, "assistant", "Anyway, how was your week?", 25),
    ("Caroline", "user", "Busy, lots of meetings at work.", 25),
    ("Caroline", "user", "I cooked pasta for dinner, I cook pasta a lot, cooking pasta "
                         "relaxes me.", 20),
    (None, "assistant", "Lovely. What else did you cook?", 20),
    ("Caroline", "user", "Made lentil soup, slowly.", 1),
]


@pytest.fixture(scope="module")
def dialogue(procs: dict[str, Proc], catalog: Settings, mem_tenants: dict[str, Tenant]
             ) -> dict[str, list[dict[str, Any]]]:
    """A's dialogue (user USER), and B's session of the same name and user where Melanie's
    turn is about pottery too; every message extracted."""
    pub = Publisher(catalog)
    out: dict[str, list[dict[str, Any]]] = {}
    try:
        for tenant, turns in (("a", TURNS), ("b", [
                ("Caroline", "user", "Tenant B: Caroline's pottery wheel is new.", 2),
                ("Melanie", "assistant", "Tenant B cooked soup yesterday.", 1)])):
            ns = mem_tenants[tenant].namespace
            msgs = [message(text, role=role, created_at=_at(days),
                            metadata={"speaker": name} if name else {})
                    for name, role, text, days in turns]
            send(pub, ns, "talk", session_put(ns, "talk", user_id=USER), add(ns, "talk", *msgs))
            out[tenant] = msgs
    finally:
        pub.close()
    uuids = [m["uuid"] for msgs in out.values() for m in msgs]
    wait_for(lambda: extracted(catalog, uuids), timeout=30, what="the messages extracted")
    return out


def _search(client: TestClient, tenant: Tenant, query: str, **body: Any) -> list[dict[str, Any]]:
    res = client.post("/v1/memory/search", headers=tenant.headers,
                      json={"query": query, "user_id": USER, **body})
    assert res.status_code == 200, res.text
    return list(res.json()["results"])


def test_a_named_speaker_finds_their_own_turn(
        mem_client: TestClient, mem_tenants: dict[str, Tenant],
        dialogue: dict[str, list[dict[str, Any]]]) -> None:
    a, b = mem_tenants["a"], mem_tenants["b"]
    hits = _search(mem_client, a, "What does Caroline think about pottery?")
    # Melanie's turn holds "Caroline" and "pottery" thrice; the rules put Caroline's first
    assert hits[0]["uuid"] == dialogue["a"][0]["uuid"], [h["content"] for h in hits]
    assert hits[0]["metadata"]["speaker"] == "Caroline"
    assert set(hits[0]) >= {"kind", "uuid", "seq", "role", "content", "metadata", "created_at",
                            "session_id", "score", "context"}
    a_uuids = {m["uuid"] for m in dialogue["a"]}
    assert {h["uuid"] for h in hits} <= a_uuids
    # B's search sees B's turns only, its own Caroline first
    b_hits = _search(mem_client, b, "What does Caroline think about pottery?")
    assert b_hits[0]["uuid"] == dialogue["b"][0]["uuid"]
    assert not {h["uuid"] for h in b_hits} & a_uuids


def test_yesterday_finds_the_turn_said_yesterday(
        mem_client: TestClient, mem_tenants: dict[str, Tenant],
        dialogue: dict[str, list[dict[str, Any]]]) -> None:
    a, b = mem_tenants["a"], mem_tenants["b"]
    hits = _search(mem_client, a, "What did I cook yesterday?")
    # the pasta turn says "cook" thrice; yesterday's soup says it not at all
    assert hits[0]["uuid"] == dialogue["a"][-1]["uuid"], [h["content"] for h in hits]
    assert hits[0]["created_at"][:10] == (TODAY - timedelta(days=1)).date().isoformat()
    b_hits = _search(mem_client, b, "What did I cook yesterday?")
    assert {h["uuid"] for h in b_hits} <= {m["uuid"] for m in dialogue["b"]}
    # a request's own range still bounds the answer
    bounded = _search(mem_client, a, "What did I cook yesterday?", until=_at(10))
    assert bounded and all(h["created_at"] < _at(10) for h in bounded)
