"""Issue 12, item 4 (search): POST /v1/sessions/{id}/search and POST /v1/memory/search on the
real pipeline (messages published, extracted by the workers), two tenants with sessions of the
same names: hybrid hits with scores, the where filter with and/or, the date range, min_score,
MMR, neighbouring turns, summaries in scope, a user's sessions, and bad requests refused naming
the field.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from pipeline.settings import Settings
from tests.memory.conftest import Tenant
from tests.memory.memutil import add, message, send, session_put
from tests.memory.workutil import extracted, summaries_of
from tests.pipelineutil import Proc, Publisher, wait_for

pytestmark = pytest.mark.stack
# the tenants are the memory suite's: other modules' users and sessions live there too
U1, U2 = f"u1-{uuid.uuid4().hex[:8]}", f"u2-{uuid.uuid4().hex[:8]}"

TURNS = [
    ("user", "I adopted a beagle named Biscuit last spring.", {"topic": "pets", "mood": 4}),
    ("assistant", "Biscuit sounds lovely! How is the training going?", {"topic": "pets"}),
    ("user", "We practise sit and stay every morning in the park.", {"topic": "pets"}),
    ("user", "My sister Lena moved to Vienna for a violin job.", {"topic": "family", "mood": 2}),
    ("assistant", "Vienna has a great orchestra scene for violinists.", {"topic": "family"}),
    ("user", "I am learning Rust to build a sensor dashboard.", {"topic": "work", "mood": 5}),
    ("user", "ok", {}),
    ("user", "I adopted a beagle named Biscuit last spring.", {"topic": "pets", "dup": True}),
]


def _publish(publisher: Publisher, catalog: Settings, tenant: Tenant, sid: str, user: str,
             turns: list[tuple[str, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    msgs = [message(text, role=role, metadata=meta,
                    created_at=f"2026-03-{i + 1:02d}T10:00:00+00:00")
            for i, (role, text, meta) in enumerate(turns)]
    ns = tenant.namespace
    send(publisher, ns, sid, session_put(ns, sid, user_id=user), add(ns, sid, *msgs))
    return msgs


@pytest.fixture(scope="module")
def conversations(procs: dict[str, Proc], catalog: Settings, mem_tenants: dict[str, Tenant]
                  ) -> dict[str, list[dict[str, Any]]]:
    """A's `pets` session (user u1) and its `dev` session, B's `pets` session (different text),
    every message extracted."""
    pub = Publisher(catalog)
    try:
        a, b = mem_tenants["a"], mem_tenants["b"]
        out = {"a-pets": _publish(pub, catalog, a, "pets", U1, TURNS),
               "a-dev": _publish(pub, catalog, a, "dev", U1, [
                   ("user", "The Rust dashboard reads the Vienna sensors.", {"topic": "work"})]),
               "a-other": _publish(pub, catalog, a, "other", U2, [
                   ("user", "Biscuit is also the name of my cat.", {"topic": "pets"})]),
               "b-pets": _publish(pub, catalog, b, "pets", U1, [
                   ("user", "Tenant B talks about Biscuit the parrot.", {"topic": "pets"})])}
    finally:
        pub.close()
    uuids = [m["uuid"] for msgs in out.values() for m in msgs]
    wait_for(lambda: extracted(catalog, uuids), timeout=30, what="the messages extracted")
    return out


def _poster(client: TestClient, tenant: Tenant) -> Callable[..., Any]:
    def post(path: str, **body: Any) -> Any:
        return client.post(path, json=body, headers=tenant.headers)
    return post


def test_session_search_is_hybrid_and_tenant_scoped(
        mem_client: TestClient, mem_tenants: dict[str, Tenant],
        conversations: dict[str, list[dict[str, Any]]]) -> None:
    a, b = (_poster(mem_client, mem_tenants[t]) for t in ("a", "b"))
    res = a("/v1/sessions/pets/search", query="what is the name of my dog?", limit=3)
    assert res.status_code == 200, res.text
    hits = res.json()["results"]
    assert hits and "Biscuit" in hits[0]["content"] and hits[0]["session_id"] == "pets"
    assert all(0 < h["score"] <= 1 for h in hits)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    # dense alone still finds the beagle by meaning; lexical alone by the word
    for channels in (["dense"], ["lexical"]):
        only = a("/v1/sessions/pets/search", query="Biscuit beagle", channels=channels).json()
        assert "Biscuit" in only["results"][0]["content"]
    # B sees only its own session of the same name
    b_hits = b("/v1/sessions/pets/search", query="Biscuit", limit=10).json()["results"]
    assert [h["content"] for h in b_hits] == ["Tenant B talks about Biscuit the parrot."]
    assert b("/v1/sessions/dev/search", query="Rust").status_code == 404


def test_where_dates_min_score_mmr_and_context(
        mem_client: TestClient, mem_tenants: dict[str, Tenant],
        conversations: dict[str, list[dict[str, Any]]]) -> None:
    a = _poster(mem_client, mem_tenants["a"])
    where = {"and": [{"jsonpath": "$.topic", "in": ["family", "work"]},
                     {"or": [{"jsonpath": "$.mood", "gte": 5}, {"jsonpath": "$.mood", "eq": 2}]}]}
    hits = a("/v1/sessions/pets/search", query="sister violin Rust", where=where,
             limit=10).json()["results"]
    assert sorted(h["metadata"]["mood"] for h in hits) == [2, 5]
    negated = a("/v1/sessions/pets/search", query="sister violin Rust", limit=10,
                where={"and": [where["and"][0], {"not": where["and"][1]}]}).json()["results"]
    # `not` is the complement: turns of those topics without a mood come back too
    assert negated and all(h["metadata"].get("mood") not in (2, 5) for h in negated)
    dated = a("/v1/sessions/pets/search", query="Biscuit beagle sister", limit=10,
              since="2026-03-02T00:00:00Z", until="2026-03-05T00:00:00Z").json()["results"]
    assert {h["created_at"][:10] for h in dated} <= {"2026-03-02", "2026-03-03", "2026-03-04"}
    assert dated
    top = a("/v1/sessions/pets/search", query="beagle Biscuit", min_score=0.9).json()["results"]
    assert top and all(h["score"] >= 0.9 for h in top)
    # the two identical turns: the fused top 3 holds both, MMR never both (it may take
    # neither: the reply after the first, indexed with it as context, can rank first and make
    # both look like repeats of it) and fills the 3 with other turns
    plain = a("/v1/sessions/pets/search", query="adopted beagle Biscuit", limit=3).json()
    assert [h["content"] for h in plain["results"]].count(TURNS[0][1]) == 2
    varied = a("/v1/sessions/pets/search", query="adopted beagle Biscuit", limit=3,
               mmr_lambda=0.3).json()["results"]
    assert [h["content"] for h in varied].count(TURNS[0][1]) <= 1 and len(varied) == 3
    ctx = a("/v1/sessions/pets/search", query="Vienna violin sister", limit=1, context=1,
            where={"jsonpath": "$.topic", "eq": "family"}).json()["results"][0]
    assert ctx["seq"] in (4, 5)  # the sister's turn, or the reply that carries it as context
    assert [t["seq"] for t in ctx["context"]] == [ctx["seq"] - 1, ctx["seq"] + 1]


def test_user_search_spans_the_users_sessions_only(
        mem_client: TestClient, mem_tenants: dict[str, Tenant],
        conversations: dict[str, list[dict[str, Any]]]) -> None:
    a, b = (_poster(mem_client, mem_tenants[t]) for t in ("a", "b"))
    hits = a("/v1/memory/search", user_id=U1, query="Rust Vienna Biscuit",
             limit=20).json()["results"]
    assert {h["session_id"] for h in hits} == {"pets", "dev"}  # not u2's "other"
    assert not any("cat" in h["content"] for h in hits)
    b_hits = b("/v1/memory/search", user_id=U1, query="Biscuit").json()["results"]
    assert {h["content"] for h in b_hits} == {"Tenant B talks about Biscuit the parrot."}
    assert a("/v1/memory/search", user_id="nobody", query="x").json() == {
        "results": [], "degraded": None, "knowledge": None, "knowledge_degraded": None}


def test_summaries_are_searchable(mem_client: TestClient, mem_tenants: dict[str, Tenant],
                                  catalog: Settings, procs: dict[str, Proc],
                                  publisher: Publisher) -> None:
    tenant = mem_tenants["a"]
    ns, sid = tenant.namespace, f"long-{uuid.uuid4().hex[:8]}"
    turns = [message(f"Day {i}: the greenhouse tomatoes needed {i} litres of water.")
             for i in range(13)]
    send(publisher, ns, sid, add(ns, sid, *turns))
    wait_for(lambda: (s := summaries_of(catalog, ns, sid)) and s[0][2] == "done", timeout=30,
             what="the summary embedded")
    a = _poster(mem_client, tenant)
    hits = a(f"/v1/sessions/{sid}/search", query="greenhouse tomatoes water",
             search_scope="summary").json()["results"]
    assert [h["kind"] for h in hits] == ["summary"] and hits[0]["seq"] == 7
    both = a(f"/v1/sessions/{sid}/search", query="greenhouse tomatoes water", limit=20,
             search_scope="both").json()["results"]
    assert {h["kind"] for h in both} == {"message", "summary"}
    # a where filter reads message metadata: summaries have none, so none match it
    filtered = a(f"/v1/sessions/{sid}/search", query="greenhouse", search_scope="summary",
                 where={"jsonpath": "$.topic", "exists": True}).json()
    assert filtered["results"] == []


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"query": "x", "where": {"jsonpath": "$.a') || true", "eq": 1}}, 422, "where.jsonpath"),
    ({"query": "x", "where": {"and": [{"jsonpath": "$.a", "gt": {"x": 1}}]}}, 422,
     "where.and[0].gt"),
    ({"query": "x", "limit": 0}, 422, "limit"),
    ({"query": "x", "limit": 500}, 422, "limit"),
    ({"query": "x", "context": 50}, 422, "context"),
    ({"query": "x", "search_scope": "all"}, 422, "search_scope"),
    ({"query": "x", "mmr_lambda": 2}, 422, "mmr_lambda"),
    ({"query": "x", "since": "2026-03-05T00:00:00Z", "until": "2026-03-01T00:00:00Z"}, 422,
     "since"),
    ({"query": "   "}, 422, "query"),
    ({"query": "x", "surprise": 1}, 422, "surprise"),
])
def test_bad_requests_name_the_field(mem_client: TestClient, mem_tenants: dict[str, Tenant],
                                     conversations: dict[str, list[dict[str, Any]]],
                                     body: dict[str, Any], status: int, field: str) -> None:
    res = _poster(mem_client, mem_tenants["a"])("/v1/sessions/pets/search", **body)
    assert res.status_code == status, res.text
    assert res.json()["error"]["field"] == field


def test_a_where_value_is_data_not_sql(mem_client: TestClient, mem_tenants: dict[str, Tenant],
                                       conversations: dict[str, list[dict[str, Any]]]) -> None:
    a = _poster(mem_client, mem_tenants["a"])
    hostile = "pets') OR true; DROP TABLE messages; --"
    res = a("/v1/sessions/pets/search", query="Biscuit",
            where={"jsonpath": "$.topic", "eq": hostile})
    assert res.status_code == 200 and res.json()["results"] == []
    assert a("/v1/sessions/pets/search", query="Biscuit").json()["results"]


@pytest.mark.parametrize(("where", "field"), [
    ('{"jsonpath": "$.score", "gt": 1e999}', "where.gt"),
    ('{"jsonpath": "$.score", "lt": -1e999}', "where.lt"),
    ('{"and": [{"jsonpath": "$.score", "eq": NaN}]}', "where.and[0].eq"),
    ('{"jsonpath": "$.score", "in": [1, Infinity]}', "where.in[1]"),
])
def test_a_non_finite_where_number_is_a_422_naming_it(
        mem_client: TestClient, mem_tenants: dict[str, Tenant],
        conversations: dict[str, list[dict[str, Any]]], where: str, field: str) -> None:
    """1e999 parses to infinity and Python's JSON reads NaN/Infinity: none has a JSON form the
    database takes, so each is the caller's error, not a 500 (issue 35, item 12)."""
    body = '{"query": "Biscuit", "where": ' + where + "}"
    res = mem_client.post("/v1/sessions/pets/search", content=body.encode(),
                          headers={**mem_tenants["a"].headers,
                                   "Content-Type": "application/json"})
    assert res.status_code == 422, res.text
    assert res.json()["error"]["field"] == field
