"""Search's ranking controls on the real stack: the reranker stage against a local fake
`/rerank` server that scores by a rule this test knows (the text's length), `strict` answers,
per-request fusion knobs with explain, and snippet highlights (first and continued pages).
Two tenants hold the same notes, B one more: a reranker never sees B's text in A's search."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from pipeline.retrieval.settings import RerankerSettings
from pipeline.settings import Settings
from tests.apiutil import Tenant, api_client, ok
from tests.httpserve import json_handler, serve
from tests.pipelineutil import ingest, put

pytestmark = pytest.mark.stack

QUERY = "crane inspection"
NOTES = {
    "harbor": ("Harbor crane log", "# Harbor\n\nThe harbor crane failed its inspection twice.\n\n"
               "## Repairs\n\nA new crane cable arrived; the next inspection is in May."),
    "yard": ("Yard notes", "# Yard\n\nForklifts and one small crane.\n\n## Safety\n\n"
             "Annual inspection of every lifting device, the crane included."),
    "budget": ("Budget 2025", "# Budget\n\nThe crane inspection contract costs 12,000 a "
               "year.\n\n## Other\n\nFuel, tyres and insurance."),
}
SECRET = "Secret crane ledger of tenant B"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class FakeReranker:
    """Answers `/rerank` with score = len(text), in Cohere's or TEI's shape; records every
    request; can be made slow."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.delay = 0.0
        self.lock = threading.Lock()

    def __call__(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        with self.lock:
            self.requests.append({"path": path, **body})
        if self.delay:
            time.sleep(self.delay)
        texts = body.get("documents", body.get("texts")) or []
        scores = [{"index": i, "score": float(len(t))} for i, t in enumerate(texts)]
        if "texts" in body:  # text-embeddings-inference: a bare list, best first
            return 200, sorted(scores, key=lambda s: -s["score"])
        return 200, {"results": [{"index": s["index"], "relevance_score": s["score"]}
                                 for s in scores]}


@pytest.fixture(scope="module")
def ranked(catalog: Settings) -> dict[str, Tenant]:
    out = {}
    for name in ("a", "b"):
        ns = uuid.uuid4()
        ids = {k: str(uuid.uuid4()) for k in NOTES}
        events = [put(ns, id=ids[k], kind="note", title=title, content=text,
                      content_type="text/markdown") for k, (title, text) in NOTES.items()]
        if name == "b":
            ids["secret"] = str(uuid.uuid4())
            events.append(put(ns, id=ids["secret"], kind="note", title=SECRET,
                              content="The crane inspection bribes, B's own."))
        ingest(catalog, events)
        out[name] = Tenant(ns, f"key-rank-{name}-{uuid.uuid4().hex[:8]}", ids)
    return out


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[FakeReranker, str]]:
    scorer = FakeReranker()
    with serve(json_handler(scorer)) as url:
        yield scorer, url


def _client(catalog: Settings, ranked: dict[str, Tenant], **reranker: Any) -> TestClient:
    overrides: dict[str, Any] = {"reranker": RerankerSettings(**reranker)} if reranker else {}
    return api_client(catalog, ranked.values(), "read", **overrides)


def _search(client: TestClient, tenant: Tenant, **body: Any) -> dict[str, Any]:
    return ok(client.post("/v1/search", json={"query": QUERY, **body}, headers=tenant.headers))


def test_reranker_orders_the_top_by_its_scores_and_sees_one_tenant(
        catalog: Settings, ranked: dict[str, Tenant],
        fake: tuple[FakeReranker, str]) -> None:
    scorer, url = fake
    a, b = ranked["a"], ranked["b"]
    with _client(catalog, ranked, url=url, depth=3, timeout=5.0) as client:
        fused = _search(client, a, rerank=False, limit=10)
        assert fused["degrade"] is None and not scorer.requests  # rerank: false asks nothing
        answer = _search(client, a, explain=True, limit=10)
        assert answer["degrade"] is None
        [request] = scorer.requests
        assert request["query"] == QUERY and request["path"].endswith("/rerank")
        texts = request["documents"]
        # the fused top 3, each as title + best part's text, re-ordered by the rule
        top = [o["title"] for o in fused["objects"][:3]]
        assert [t.split(" ")[0] for t in texts] == [t.split(" ")[0] for t in top]
        by_rule = sorted(range(len(texts)), key=lambda i: (-len(texts[i]), i))
        assert [o["title"] for o in answer["objects"][:3]] == [top[i] for i in by_rule]
        assert [o["id"] for o in answer["objects"][3:]] == [o["id"] for o in fused["objects"][3:]]
        hits = answer["explain"]["hits"]
        assert [h["rerank_score"] for h in hits[:3]] == [float(len(texts[i])) for i in by_rule]
        assert answer["explain"]["rerank"] == {"depth": 3, "skipped": False}
        # B's search sees its own secret; A's never sent it
        scorer.requests.clear()
        _search(client, b, limit=10)
        assert any(SECRET in t for t in scorer.requests[0]["documents"])
        scorer.requests.clear()
        for _ in range(2):
            _search(client, a, limit=10)
        assert scorer.requests and not any(
            SECRET in t or "bribes" in t for r in scorer.requests for t in r["documents"])


def test_tei_shape_and_a_slow_or_down_reranker(
        catalog: Settings, ranked: dict[str, Tenant],
        fake: tuple[FakeReranker, str]) -> None:
    scorer, url = fake
    a = ranked["a"]
    scorer.requests.clear()
    with _client(catalog, ranked, url=url, depth=3, timeout=5.0, field="texts") as client:
        answer = _search(client, a)
        assert "texts" in scorer.requests[-1] and scorer.requests[-1]["truncate"] is True
        assert answer["degrade"] is None
    with _client(catalog, ranked, url=url, depth=3, timeout=0.2) as client:
        fused = _search(client, a, rerank=False)
        scorer.delay = 1.0
        try:
            slow = _search(client, a)
            refused = client.post("/v1/search", json={"query": QUERY, "strict": True},
                                  headers=a.headers)
        finally:
            scorer.delay = 0.0
        assert slow["degrade"] == "rerank_skipped"
        assert [o["id"] for o in slow["objects"]] == [o["id"] for o in fused["objects"]]
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "degraded_answer"
        assert "rerank_skipped" in refused.json()["error"]["message"]
    down = f"http://user:hunter2@127.0.0.1:{_closed_port()}/v1"
    with _client(catalog, ranked, url=down, api_key="sk-secret") as client:
        assert _search(client, a)["degrade"] == "rerank_skipped"
        metrics = client.get("/metrics").text
        assert 'mode="rerank_skipped"' in metrics
        assert "hunter2" not in metrics and "sk-secret" not in metrics


def test_rerank_true_without_a_reranker_is_422(catalog: Settings,
                                               ranked: dict[str, Tenant]) -> None:
    with _client(catalog, ranked) as client:
        answer = client.post("/v1/search", json={"query": QUERY, "rerank": True},
                             headers=ranked["a"].headers)
        assert answer.status_code == 422
        assert answer.json()["error"]["field"] == "rerank"
        assert _search(client, ranked["a"])["degrade"] is None  # no reranker: nothing skipped


def test_strict_with_the_embedder_down(catalog: Settings, ranked: dict[str, Tenant]) -> None:
    a = ranked["a"]
    broken: dict[str, Any] = {"embedder": "http", "embedder_url": f"http://127.0.0.1:{_closed_port()}/v1",
              "embedding_dim": catalog.vector_dim}
    with api_client(catalog, ranked.values(), "read", **broken) as client:
        assert _search(client, a)["degrade"] == "lexical_only"
        for route in ("/v1/search", "/v1/find_exact"):
            refused = client.post(route, json={"query": QUERY, "strict": True},
                                  headers=a.headers)
            if route == "/v1/find_exact":  # no dense channel: never degraded, strict answers
                assert refused.status_code == 200, refused.text
                continue
            assert refused.status_code == 503, refused.text
            error = refused.json()["error"]
            assert error["code"] == "degraded_answer" and error["field"] == "strict"
            assert "lexical_only" in error["message"]
            assert refused.headers["Retry-After"] == "1"


def test_fusion_defaults_do_not_move_and_explain_shows_channels(
        catalog: Settings, ranked: dict[str, Tenant]) -> None:
    a, b = ranked["a"], ranked["b"]
    with _client(catalog, ranked) as client:
        plain = _search(client, a, explain=True)
        wired = plain["explain"]["fusion"]
        same = _search(client, a, explain=True, fusion={
            "weights": wired["weights"], "rrf_k": wired["rrf_k"]})
        # the same order and fused scores (`score` decays with the clock between requests)
        assert [(h["id"], h["fused_score"]) for h in same["explain"]["hits"]] == [
            (h["id"], h["fused_score"]) for h in plain["explain"]["hits"]]
        assert wired["rrf_k"] == 10 and wired["weights"]["lexical"] == 1.25
        for hit in plain["explain"]["hits"]:
            for name, found in hit["channels"].items():
                assert name in wired["weights"]
                assert found["rank"] >= 1 and isinstance(found["score"], float)
        assert any("dense" in h["channels"] for h in plain["explain"]["hits"])
        only_lexical = _search(client, a, explain=True, fusion={
            "weights": {n: 0 for n in wired["weights"] if n != "lexical"}, "rrf_k": 60})
        assert only_lexical["explain"]["fusion"]["rrf_k"] == 60
        assert all(set(h["channels"]) <= {"lexical"} for h in only_lexical["explain"]["hits"])
        # fusion cannot widen a namespace: A's search never returns B's secret
        wide = _search(client, a, limit=100, fusion={"weights": {"dense": 10}, "rrf_k": 0})
        assert ranked["b"].ids["secret"] not in {o["id"] for o in wide["objects"]}
        assert {o["id"] for o in wide["objects"]} <= set(a.ids.values())
        assert ranked["b"].ids["secret"] in {o["id"] for o in _search(client, b)["objects"]}
        for body, field in (({"weights": {"nope": 1}}, "fusion.weights.nope"),
                            ({"weights": {"lexical": 11}}, "fusion.weights.lexical"),
                            ({"rrf_k": -1}, "fusion.rrf_k"),
                            ({"ppr": {"damping": 1.0}}, "fusion.ppr.damping")):
            bad = client.post("/v1/search", json={"query": QUERY, "fusion": body},
                              headers=a.headers)
            assert bad.status_code == 422, body
            assert bad.json()["error"]["field"] == field
        ppr = _search(client, a, mode="ppr", explain=True,
                      fusion={"ppr": {"damping": 0.7, "list_weight": 2, "rrf_k": 3}})
        assert ppr["explain"]["fusion"]["ppr"]["damping"] == 0.7
        assert ppr["explain"]["fusion"]["ppr"]["list_weight"] == 2
        assert ppr["explain"]["fusion"]["ppr"]["rrf_k"] == 3


def test_highlights_on_first_and_continued_pages(catalog: Settings,
                                                 ranked: dict[str, Tenant]) -> None:
    a = ranked["a"]
    with _client(catalog, ranked) as client:
        first = _search(client, a, limit=1)
        assert first["has_more"]
        pages = [first]
        while pages[-1]["has_more"]:
            pages.append(ok(client.post("/v1/continue", json={
                "result_set_id": pages[-1]["result_set_id"], "limit": 1}, headers=a.headers)))
        evidence = [e for p in pages for o in p["objects"] for e in o["evidence"]]
        assert len(pages) >= 3 and evidence
        assert any(e["highlights"] for p in pages[1:] for o in p["objects"]
                   for e in o["evidence"])
        for e in evidence:
            marked = [e["snippet"][s:t].lower() for s, t in e["highlights"]]
            assert all(w.startswith(("crane", "inspection")) for w in marked), marked
            assert ("crane" in e["snippet"].lower()) == any(
                w.startswith("crane") for w in marked)
