"""The ranking controls' pure parts and the reranker adapter against a local HTTP server: the
reranker stage's new order, the fusion knobs' defaults and bounds, snippet highlights."""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from hypothesis import given, strategies as st

from pipeline.domain.errors import InvalidInput, RerankerError, RerankerUnavailable
from pipeline.domain.read_model import FusionParams
from pipeline.retrieval.ppr.model import PprConfig
from pipeline.retrieval.rerank import HttpReranker, RerankStage
from pipeline.retrieval.rerank.stage import reorder
from pipeline.retrieval.snippets import Snippets
from pipeline.retrieval.tuning import resolve_fusion
from tests.httpserve import serve


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=0, max_size=12),
       st.integers(min_value=0, max_value=6))
def test_reorder_sorts_the_head_and_keeps_the_tail(scores: list[float], tail: int) -> None:
    head = [{"id": str(uuid.uuid4())} for _ in scores]
    rest = [{"id": str(uuid.uuid4())} for _ in range(tail)]
    out, by_id = reorder(head + rest, head, scores)
    assert sorted(i["id"] for i in out) == sorted(i["id"] for i in head + rest)
    assert out[len(head):] == rest
    got = [by_id[uuid.UUID(i["id"])] for i in out[: len(head)]]
    assert got == sorted(scores, reverse=True)
    # ties keep the fused order
    for x, y in itertools.pairwise(out[: len(head)]):
        if by_id[uuid.UUID(x["id"])] == by_id[uuid.UUID(y["id"])]:
            assert head.index(x) < head.index(y)


def _fusion(params: FusionParams | None) -> Any:
    return resolve_fusion(params, channels=["lexical", "trigram", "dense"],
                          weights={"lexical": 1.25, "trigram": 0.5}, rrf_k=10, ppr_rrf_k=5,
                          ppr_list_weight=0.8, ppr=PprConfig(passage_seed_weight=0.05))


def test_fusion_defaults_are_the_wired_values_and_bounds_name_the_field() -> None:
    wired = _fusion(None)
    assert dict(wired.weights) == {"lexical": 1.25, "trigram": 0.5, "dense": 1.0}
    assert (wired.rrf_k, wired.ppr_rrf_k, wired.ppr_list_weight) == (10, 5, 0.8)
    assert _fusion(FusionParams()) == wired
    assert _fusion(FusionParams(weights=(("lexical", 1.25),), rrf_k=10)) == wired
    tuned = _fusion(FusionParams(weights=(("dense", 0.0),), rrf_k=60, ppr_damping=0.7,
                                 ppr_passage_seed_weight=0.2))
    assert tuned.channels() == ["lexical", "trigram"]
    assert tuned.ppr is not None and (tuned.ppr.damping, tuned.ppr.passage_seed_weight) == (
        0.7, 0.2)
    for params, field in ((FusionParams(weights=(("fuzzy", 1.0),)), "fusion.weights.fuzzy"),
                          (FusionParams(weights=(("dense", 10.5),)), "fusion.weights.dense"),
                          (FusionParams(weights=(("dense", float("nan")),)),
                           "fusion.weights.dense"),
                          (FusionParams(rrf_k=1001), "fusion.rrf_k"),
                          (FusionParams(ppr_damping=0.99), "fusion.ppr.damping"),
                          (FusionParams(ppr_list_weight=-1), "fusion.ppr.list_weight")):
        with pytest.raises(InvalidInput) as caught:
            _fusion(params)
        assert caught.value.field == field


def test_highlights_are_offsets_of_the_query_words_in_the_snippet() -> None:
    cut = Snippets("warehouse robots", width=200)
    text = ("Acme sells ROBOT arms for Warehouses and more warehouse robots elsewhere, "
            "with a lot more text to cut away")
    excerpt = cut(text)
    marks = cut.highlights(excerpt)
    assert [excerpt[s:e] for s, e in marks] == ["ROBOT", "Warehouses", "warehouse", "robots"]
    assert Snippets("", width=60).highlights(excerpt) == []


class _Server:
    """A scripted `/rerank` server: each request gets the next answer; requests are kept."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, Any]] = []
        self.seen: list[tuple[str, str | None, dict[str, Any]]] = []


@pytest.fixture()
def server() -> Iterator[tuple[_Server, str]]:
    script = _Server()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            script.seen.append((self.path, self.headers.get("Authorization"), body))
            status, answer = script.answers.pop(0)
            raw = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with serve(Handler) as url:
        yield script, url


def test_http_reranker_speaks_both_shapes(server: tuple[_Server, str]) -> None:
    script, url = server
    cohere = HttpReranker(url, model="rr", api_key="sk-1")
    script.answers.append((200, {"results": [{"index": 1, "relevance_score": 0.9},
                                             {"index": 0, "relevance_score": 0.1}]}))
    assert asyncio.run(cohere.rerank("q", ["a", "b"])) == [0.1, 0.9]
    path, auth, body = script.seen[-1]
    assert path == "/v1/rerank" and auth == "Bearer sk-1"
    assert body == {"query": "q", "documents": ["a", "b"], "model": "rr"}
    tei = HttpReranker(url.removesuffix("/v1") + "/rerank", field="texts")
    script.answers.append((200, [{"index": 0, "score": -2.5}, {"index": 1, "score": 3}]))
    assert asyncio.run(tei.rerank("q", ["a", "b"])) == [-2.5, 3.0]
    assert script.seen[-1][0] == "/rerank"
    assert script.seen[-1][2] == {"query": "q", "texts": ["a", "b"], "truncate": True}
    bad: Any
    for bad in ({"results": [{"index": 0, "relevance_score": 1}]},
                [{"index": 0, "score": 1}, {"index": 0, "score": 2}],
                {"results": [{"index": 0, "score": "x"}, {"index": 1, "score": 1}]},
                {"data": []}):
        script.answers.append((200, bad))
        with pytest.raises(RerankerError):
            asyncio.run(cohere.rerank("q", ["a", "b"]))
    script.answers.append((503, {"error": "loading"}))
    with pytest.raises(RerankerUnavailable):
        asyncio.run(cohere.rerank("q", ["a", "b"]))


def test_reranker_errors_never_carry_credentials(
        caplog: pytest.LogCaptureFixture) -> None:
    port_url = "http://user:hunter2@127.0.0.1:9/v1"  # discard port: nothing listens
    stage = RerankStage(HttpReranker(port_url, api_key="sk-secret"), depth=2, budget=2.0)
    assert stage.reranker is not None
    with pytest.raises(RerankerUnavailable) as caught:
        asyncio.run(stage.reranker.rerank("q", ["a"]))
    assert "hunter2" not in caught.value.message and "sk-secret" not in caught.value.message
    assert "hunter2" not in caplog.text
