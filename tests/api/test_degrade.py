"""Degrade, don't fail: a down embedder gives lexical-only search, a down graph gives
containment-only expansion and Postgres-backed entity find, each labelled."""

from __future__ import annotations

import socket

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from pipeline.lexical.searcher import TantivySearcher
from pipeline.settings import Settings
from tests.api.conftest import Tenant

pytestmark = pytest.mark.stack


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_embedder_and_graph_down(api_settings: Settings, tenants: dict[str, Tenant]) -> None:
    broken = api_settings.model_copy(update={
        "embedder": "http", "embedder_url": f"http://127.0.0.1:{_closed_port()}/v1",
        "embedding_dim": api_settings.vector_dim,
        "falkordb_url": f"redis://127.0.0.1:{_closed_port()}",
    })
    a = tenants["a"]
    with TestClient(create_app(broken)) as client:
        search = client.post("/v1/search", json={"query": "Rotterdam pilot"},
                             headers=a.headers)
        assert search.status_code == 200, search.text
        assert search.json()["degrade"] == "lexical_only"
        assert search.json()["objects"][0]["id"] == a.ids["note"]
        expand = client.post("/v1/expand", json={"object_id": a.ids["note"]},
                             headers=a.headers).json()
        assert expand["degrade"] == "graph_unavailable"
        assert expand["mode"] == "children"
        assert expand["objects"] and all(o["parent_id"] == a.ids["note"]
                                         for o in expand["objects"])
        found = client.post("/v1/find_objects", json={"query": "Acme Robotics"},
                            headers=a.headers).json()
        assert found["degrade"] == "graph_unavailable"
        assert a.ids["company"] in [o["id"] for o in found["objects"]]
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["dependencies"]["falkordb"] == "down"
        metrics = client.get("/metrics").text
        assert 'brainstream_api_degraded_total{endpoint="search",mode="lexical_only"}' in metrics


class PanicException(BaseException):
    """What pyo3 raises when Rust code (Tantivy) panics: a BaseException, by its name."""


def test_an_engine_panic_and_an_unexpected_error_answer_json_500s(
        api_settings: Settings, tenants: dict[str, Tenant],
        monkeypatch: pytest.MonkeyPatch) -> None:
    a = tenants["a"]
    raised: list[BaseException] = [
        PanicException("called `Option::unwrap()` on a `None` value"), RuntimeError("a bug")]
    with TestClient(create_app(api_settings), raise_server_exceptions=False) as client:
        for error, code in zip(raised, ("engine_failed", "internal"), strict=True):
            def fails(*args: object, error: BaseException = error) -> None:
                raise error

            monkeypatch.setattr(TantivySearcher, "_bm25", fails)
            answer = client.post("/v1/search", json={"query": "Rotterdam pilot"},
                                 headers=a.headers)
            assert answer.status_code == 500
            assert answer.json()["error"] == {"code": code, "message": "internal error",
                                              "field": None}
        monkeypatch.undo()
        # the process goes on: the next search answers
        search = client.post("/v1/search", json={"query": "Rotterdam pilot"},
                             headers=a.headers)
        assert search.status_code == 200, search.text
        assert search.json()["objects"][0]["id"] == a.ids["note"]
