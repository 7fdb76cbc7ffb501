"""What a message is indexed by (docs/memory.md), on the real pipeline with two tenants:
lexical search finds a message by the words of the two turns before it and by its date, never by
a turn further back; the embed extractor embeds it after the one turn before it, undated; another
tenant's session of the same id stays apart.
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from pipeline.embedding.embedders import build_embedder
from pipeline.settings import Settings
from tests.apiutil import ApiTenant, ok
from tests.memory.memutil import add, message, send, session_put
from tests.memory.workutil import extracted, query
from tests.pipelineutil import Proc, Publisher, wait_for

pytestmark = pytest.mark.stack
SID = f"recall-{uuid.uuid4().hex[:8]}"
A_TURNS = [("2023-05-08T10:00:00Z", "We finally adopted a rescue greyhound last weekend."),
           ("2023-05-08T10:01:00Z", "How wonderful! What did you call her?"),
           ("2023-05-08T10:02:00Z", "Pepper, after my grandmother's cat."),
           ("2023-06-20T09:00:00Z", "The kitchen renovation took the whole month."),
           ("2023-06-20T09:01:00Z", "Did the contractor finish on time?")]
B_TURNS = [("2023-05-09T08:00:00Z", "Tenant B walked a greyhound in the park."),
           ("2023-05-09T08:01:00Z", "Nice.")]


def _publish(catalog: Settings, tenant: ApiTenant, sid: str,
             turns: list[tuple[str, str]]) -> list[str]:
    msgs = [message(text, created_at=at) for at, text in turns]
    pub = Publisher(catalog)
    try:
        ns = tenant.namespace
        send(pub, ns, sid, session_put(ns, sid), add(ns, sid, *msgs))
    finally:
        pub.close()
    return [m["uuid"] for m in msgs]


@pytest.fixture(scope="module")
def recall_session(procs: dict[str, Proc], catalog: Settings,
                   recall_tenants: dict[str, ApiTenant]) -> dict[str, list[str]]:
    """A's dated session of A_TURNS and B's session of the same id; their message uuids."""
    uuids = {name: _publish(catalog, recall_tenants[name], SID, turns)
             for name, turns in (("a", A_TURNS), ("b", B_TURNS))}
    wait_for(lambda: extracted(catalog, uuids["a"] + uuids["b"]), timeout=30,
             what="the messages extracted")
    return uuids


def _lexical(client: TestClient, tenant: ApiTenant, text: str) -> list[str]:
    body = ok(client.post(f"/v1/sessions/{SID}/search", headers=tenant.headers, json={
        "query": text, "limit": 10, "channels": ["lexical"]}))
    return [h["uuid"] for h in body["results"]]


def test_a_turn_is_found_by_the_two_turns_before_it_and_its_date(
        recall_client: TestClient, recall_tenants: dict[str, ApiTenant],
        recall_session: dict[str, list[str]]) -> None:
    a, b = recall_session["a"], recall_session["b"]
    hits = _lexical(recall_client, recall_tenants["a"], "greyhound")
    # the mention, and the two turns after it; the kitchen turn has it three turns back
    assert set(hits) == {a[0], a[1], a[2]}
    assert hits[0] == a[0] or hits.index(a[0]) < hits.index(a[2])
    # "when" questions: the day, month and year are in each turn's lexical text
    assert set(_lexical(recall_client, recall_tenants["a"], "what happened in June?")) == {
        a[3], a[4]}
    assert set(_lexical(recall_client, recall_tenants["a"], "what happened in May?")) == {
        a[0], a[1], a[2]}
    # tenant B's session of the same id: its own turns only
    assert set(_lexical(recall_client, recall_tenants["b"], "greyhound")) == {b[0], b[1]}
    assert set(_lexical(recall_client, recall_tenants["b"], "June")) == set()
    assert set(_lexical(recall_client, recall_tenants["b"], "9 May")) == {b[0], b[1]}


def _vector(catalog: Settings, ns: uuid.UUID, uid: str) -> Any:
    [(text,)] = query(catalog, "SELECT embedding::text FROM messages WHERE namespace_id = %s"
                      " AND uuid = %s", str(ns), uid)
    return np.array([float(x) for x in text.strip("[]").split(",")])


def _cosine(x: Any, y: Any) -> float:
    return float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y)))


def test_the_embedding_is_of_the_turn_before_and_the_turn_undated(
        catalog: Settings, recall_tenants: dict[str, ApiTenant],
        recall_session: dict[str, list[str]]) -> None:
    embedder = build_embedder(catalog)
    texts = [t for _, t in A_TURNS]
    candidates = {"one turn": "\n".join(texts[2:4]), "two turns": "\n".join(texts[1:4]),
                  "one turn, dated": "20 June 2023\n" + "\n".join(texts[2:4])}
    expected = dict(zip(candidates, embedder.embed(list(candidates.values())), strict=True))
    stored = _vector(catalog, recall_tenants["a"].namespace, recall_session["a"][3])
    scores = {name: _cosine(stored, vector) for name, vector in expected.items()}
    assert scores["one turn"] == pytest.approx(1.0, abs=1e-4), scores
    assert max(scores["two turns"], scores["one turn, dated"]) < 0.999, scores
    # B's first turn: nothing before it in B's session (A's turns never leak in)
    b_first = _vector(catalog, recall_tenants["b"].namespace, recall_session["b"][0])
    [alone] = embedder.embed([B_TURNS[0][1]])
    assert _cosine(b_first, alone) == pytest.approx(1.0, abs=1e-4)
