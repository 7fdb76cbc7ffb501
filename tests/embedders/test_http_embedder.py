"""HttpEmbedder against a real OpenAI-compatible server on 127.0.0.1, backed by the static embedder.

The server is `http.server` in a background thread on an ephemeral port; each test picks how it
misbehaves and reads back the requests it received.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np
import pytest

from pipeline.domain.errors import ConfigError, EmbedderError, EmbedderUnavailable, Unavailable
from pipeline.embedding.embedders import HttpEmbedder, StaticEmbedder
from tests.httpserve import serve

DIM = 256


@dataclass
class ServerState:
    """What the server does next (`mode`) and what it has seen."""

    mode: str = "ok"
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class EmbeddingsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
    state: ServerState
    embedder: StaticEmbedder

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        # The client may have given up already (the timeout test): nothing left to answer.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = json.loads(raw)
        with self.state.lock:
            self.state.requests.append(
                {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
            )
            mode = self.state.mode
        if self.path != "/v1/embeddings":
            self._send(404, b'{"error": "no such route"}')
            return
        if mode.startswith("status:"):
            status = int(mode.split(":", 1)[1])
            self._send(status, json.dumps({"error": {"message": f"mode {mode}"}}).encode())
            return
        if mode == "malformed":
            self._send(200, b"<html>gateway says hi</html>", "text/html")
            return
        if mode == "slow":
            time.sleep(1.0)
        vectors = self.embedder.embed(body["input"]).tolist()
        if mode == "wrong_dim":
            vectors = [v[:128] for v in vectors]
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        if mode == "reversed":
            data.reverse()  # the contract orders by `index`, not by position
        if mode == "missing_one":
            data = data[:-1]
        if mode == "unnormalized":
            for item in data:
                item["embedding"] = [3.0 * x for x in item["embedding"]]
        answer = {"object": "list", "model": body.get("model"), "data": data}
        self._send(200, json.dumps(answer).encode())


@dataclass
class Server:
    url: str
    state: ServerState


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    state = ServerState()
    handler = type("Handler", (EmbeddingsHandler,), {"state": state, "embedder": StaticEmbedder()})
    with serve(handler) as url:
        yield Server(url, state)


@pytest.fixture
def live(server: Server) -> Server:
    """The server, reset to well-behaved with an empty request log."""
    with server.state.lock:
        server.state.mode = "ok"
        server.state.requests.clear()
    return server


@pytest.fixture(scope="module")
def reference() -> StaticEmbedder:
    return StaticEmbedder()


TEXTS = ["The pilot landed the plane.", "", "Quarterly revenue grew 4%.", "naïve café 日本語"]


def test_round_trip_equals_the_static_vectors(live: Server, reference: StaticEmbedder) -> None:
    with HttpEmbedder(live.url, dim=DIM, model="static-256", api_key="sekret") as embedder:
        vectors = embedder.embed(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), DIM)
    np.testing.assert_allclose(vectors, reference.embed(TEXTS), atol=1e-6)
    (request,) = live.state.requests
    assert request["path"] == "/v1/embeddings"
    assert request["body"] == {"model": "static-256", "input": TEXTS}
    assert request["auth"] == "Bearer sekret"


def test_empty_input_sends_nothing(live: Server) -> None:
    with HttpEmbedder(live.url, dim=DIM) as embedder:
        assert embedder.embed([]).shape == (0, DIM)
    assert live.state.requests == []


def test_url_already_naming_the_route_is_used_as_is(live: Server) -> None:
    with HttpEmbedder(live.url + "/embeddings/", dim=DIM) as embedder:
        embedder.embed(["x"])
    (request,) = live.state.requests
    assert request["path"] == "/v1/embeddings"
    assert request["auth"] is None
    assert "model" not in request["body"]


def test_large_inputs_are_split_into_batches(live: Server, reference: StaticEmbedder) -> None:
    texts = [f"passage {i} about subject {i % 11}" for i in range(150)]
    with HttpEmbedder(live.url, dim=DIM, max_batch=64) as embedder:
        vectors = embedder.embed(texts)
    assert [len(r["body"]["input"]) for r in live.state.requests] == [64, 64, 22]
    assert [t for r in live.state.requests for t in r["body"]["input"]] == texts
    np.testing.assert_allclose(vectors, reference.embed(texts), atol=1e-6)


def test_rows_are_placed_by_index(live: Server, reference: StaticEmbedder) -> None:
    live.state.mode = "reversed"
    with HttpEmbedder(live.url, dim=DIM) as embedder:
        vectors = embedder.embed(TEXTS)
    np.testing.assert_allclose(vectors, reference.embed(TEXTS), atol=1e-6)


def test_unnormalized_answers_are_normalized(live: Server, reference: StaticEmbedder) -> None:
    live.state.mode = "unnormalized"
    with HttpEmbedder(live.url, dim=DIM) as embedder:
        vectors = embedder.embed(TEXTS)
    np.testing.assert_allclose(vectors, reference.embed(TEXTS), atol=1e-6)


@pytest.mark.parametrize("status", [503, 500, 429, 408])
def test_transient_statuses_are_unavailable(live: Server, status: int) -> None:
    live.state.mode = f"status:{status}"
    with HttpEmbedder(live.url, dim=DIM) as embedder, pytest.raises(EmbedderUnavailable) as exc:
        embedder.embed(TEXTS)
    assert isinstance(exc.value, Unavailable)
    assert exc.value.code == "embedder_unavailable"


@pytest.mark.parametrize("status", [400, 401, 413, 422])
def test_client_errors_are_permanent(live: Server, status: int) -> None:
    live.state.mode = f"status:{status}"
    with HttpEmbedder(live.url, dim=DIM) as embedder, pytest.raises(EmbedderError) as exc:
        embedder.embed(TEXTS)
    assert not isinstance(exc.value, Unavailable)
    assert exc.value.code == "embedder_error"


def test_wrong_route_is_permanent(live: Server) -> None:
    url = live.url.replace("/v1", "/v2")
    with HttpEmbedder(url, dim=DIM) as embedder, pytest.raises(EmbedderError):
        embedder.embed(["x"])
    assert live.state.requests[0]["path"] == "/v2/embeddings"


def test_wrong_dimension_is_permanent(live: Server) -> None:
    live.state.mode = "wrong_dim"
    with HttpEmbedder(live.url, dim=DIM) as embedder, pytest.raises(EmbedderError):
        embedder.embed(TEXTS)


@pytest.mark.parametrize("mode", ["malformed", "missing_one"])
def test_off_contract_bodies_are_permanent(live: Server, mode: str) -> None:
    live.state.mode = mode
    with HttpEmbedder(live.url, dim=DIM) as embedder, pytest.raises(EmbedderError):
        embedder.embed(TEXTS)


def test_timeout_is_unavailable(live: Server) -> None:
    live.state.mode = "slow"
    with (
        HttpEmbedder(live.url, dim=DIM, timeout=0.2) as embedder,
        pytest.raises(EmbedderUnavailable),
    ):
        embedder.embed(["x"])


def test_server_down_is_unavailable() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago and now has no listener
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with HttpEmbedder(url, dim=DIM, timeout=2) as embedder, pytest.raises(EmbedderUnavailable):
        embedder.embed(["x"])


def test_recovers_after_a_transient_failure(live: Server, reference: StaticEmbedder) -> None:
    with HttpEmbedder(live.url, dim=DIM) as embedder:
        live.state.mode = "status:503"
        with pytest.raises(EmbedderUnavailable):
            embedder.embed(TEXTS)
        live.state.mode = "ok"
        np.testing.assert_allclose(embedder.embed(TEXTS), reference.embed(TEXTS), atol=1e-6)


def test_refuses_a_url_that_is_not_http() -> None:
    with pytest.raises(ConfigError) as exc:
        HttpEmbedder("localhost:8080", dim=DIM)
    assert exc.value.field == "embedder_url"
