"""Memory search fusion on the real pipeline (docs/memory.md): the hybrid answer is
the weighted reciprocal rank fusion of the lexical and dense answers (memory's own k, the dense
channel at MEMORY_SEARCH_DENSE_WEIGHT), its scores over the best possible fused score; a turn
that shares no word with the query, found by meaning alone, ranks beside the lexical hits; and
another tenant's session of the same name stays out.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from pipeline.memory.search import MemorySearchLimits
from pipeline.settings import Settings
from tests.memory.conftest import Tenant
from tests.memory.memutil import add, message, send, session_put
from tests.memory.workutil import extracted
from tests.pipelineutil import Proc, Publisher, wait_for

pytestmark = pytest.mark.stack
SID = f"fusion-{uuid.uuid4().hex[:8]}"
QUERY = "violin concert"
# Each turn is indexed with the turn before it (docs/memory.md), so the turn found by meaning
# alone follows one that names neither query word.
TURNS = ["I paid the electricity bill yesterday.",
         "The orchestra played Mozart symphonies in the music hall.",
         "The recipe needs two eggs and flour.",
         "We went to a violin concert on Friday evening.",
         "Our team deployed the new database server.",
         "My neighbour sells a used violin case."]
MEANING_ONLY = TURNS[1]


@pytest.fixture(scope="module")
def fusion_session(procs: dict[str, Proc], catalog: Settings,
                   mem_tenants: dict[str, Tenant]) -> None:
    """A's session of TURNS; B's session of the same id, about a violin concert too."""
    pub = Publisher(catalog)
    uuids = []
    try:
        for tenant, texts in ((mem_tenants["a"], TURNS),
                              (mem_tenants["b"], ["Tenant B heard a violin concert."])):
            msgs = [message(text) for text in texts]
            uuids += [m["uuid"] for m in msgs]
            ns = tenant.namespace
            send(pub, ns, SID, session_put(ns, SID), add(ns, SID, *msgs))
    finally:
        pub.close()
    wait_for(lambda: extracted(catalog, uuids), timeout=120, what="the messages extracted")


def _search(client: TestClient, tenant: Tenant, **body: Any) -> list[dict[str, Any]]:
    res = client.post(f"/v1/sessions/{SID}/search", json={"query": QUERY, "limit": 10, **body},
                      headers=tenant.headers)
    assert res.status_code == 200, res.text
    hits: list[dict[str, Any]] = res.json()["results"]
    return hits


def _weighted_rrf(lexical: list[str], dense: list[str], k: int, weight: float
                  ) -> list[tuple[str, float]]:
    """The documented rule, written out: sum of weight / (k + rank), over the best possible."""
    scores: dict[str, float] = {}
    for ids, w in ((lexical, 1.0), (dense, weight)):
        for rank, uid in enumerate(ids, start=1):
            scores[uid] = scores.get(uid, 0.0) + w / (k + rank)
    best = (1.0 + weight) / (k + 1)
    return sorted(((uid, s / best) for uid, s in scores.items()), key=lambda x: (-x[1], x[0]))


def test_hybrid_is_the_weighted_fusion_of_both_channels(
        mem_client: TestClient, mem_tenants: dict[str, Tenant], catalog: Settings,
        fusion_session: None) -> None:
    a, b = mem_tenants["a"], mem_tenants["b"]
    lexical = _search(mem_client, a, channels=["lexical"])
    dense = _search(mem_client, a, channels=["dense"])
    hybrid = _search(mem_client, a)
    by_text = {h["content"]: h["uuid"] for h in dense}
    assert set(by_text) == set(TURNS), "dense ranks every embedded turn of the session"
    assert by_text[MEANING_ONLY] not in {h["uuid"] for h in lexical}, "it shares no query word"

    expected = _weighted_rrf([h["uuid"] for h in lexical], [h["uuid"] for h in dense],
                             MemorySearchLimits().rrf_k, MemorySearchLimits().dense_weight)
    assert [h["uuid"] for h in hybrid] == [uid for uid, _ in expected]
    assert [h["score"] for h in hybrid] == pytest.approx([s for _, s in expected], abs=1e-5)
    # both channels' finds are there: lexical's best and the turn dense alone found, which
    # ranks above every turn neither channel put near the top
    top = [h["content"] for h in hybrid]
    assert lexical[0]["content"] in top[:2]
    unrelated = [t for t in TURNS if t != MEANING_ONLY
                 and by_text[t] not in {h["uuid"] for h in lexical}]
    dense_order = [h["content"] for h in dense]
    assert all(dense_order.index(MEANING_ONLY) < dense_order.index(t) for t in unrelated), (
        "the embedder should rank the orchestra turn above the unrelated ones", dense_order)
    assert all(top.index(MEANING_ONLY) < top.index(t) for t in unrelated), top

    # tenant B's session of the same id: its own turn only, and none of A's in its answer
    b_hits = _search(mem_client, b)
    assert [h["content"] for h in b_hits] == ["Tenant B heard a violin concert."]
    assert not {h["uuid"] for h in b_hits} & {h["uuid"] for h in hybrid}
