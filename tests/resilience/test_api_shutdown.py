"""The API stops promptly while its query embedder is still being loaded in the background: the
retry loop ends when the stop cancels it, also when the cancellation lands inside an attempt
(tenacity catches BaseException around each attempt; it retried the cancellation before, and
the lifespan's close waited on it forever, until the 10 s safety bound)."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from pipeline.domain.errors import ConfigError
from pipeline.domain.retry import retry_until_done
from pipeline.settings import Settings
from pipeline.wiring import embedder as loader
from tests.httpserve import serve
from tests.pipelineutil import wait_for


def test_a_cancelled_retry_loop_ends_even_mid_attempt() -> None:
    async def scenario() -> None:
        attempts = 0
        started = asyncio.Event()

        async def attempt() -> None:
            nonlocal attempts
            attempts += 1
            if attempts > 1:  # a loop that went on after the cancellation ends here
                raise ConfigError("a second attempt after the cancellation")
            started.set()
            await asyncio.Event().wait()  # an attempt that has not answered yet

        task = asyncio.create_task(retry_until_done(attempt, max_wait=0.01,
                                                    give_up=(ConfigError,)))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert attempts == 1

    asyncio.run(scenario())


class _SlowEmbedder(BaseHTTPRequestHandler):
    """An embedding server that answers each request after two seconds: the first `failing`
    ones with a 503, the later ones with an embedding (so a retry loop that outlives the stop
    ends, and the test with it)."""

    dim = 0
    failing = 3
    requests = 0
    lock = threading.Lock()

    def do_POST(self) -> None:
        with self.lock:
            type(self).requests += 1
            number = self.requests
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        time.sleep(2.0)
        if number <= self.failing:
            status, raw = 503, b"{}"
        else:
            status, raw = 200, json.dumps({"data": [
                {"index": i, "embedding": [0.1] * self.dim}
                for i, _ in enumerate(body["input"])]}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.stack
def test_api_stops_while_its_embedder_retries(stack_settings: Settings,
                                              caplog: pytest.LogCaptureFixture,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "EMBEDDER_RETRY_MAX_WAIT", 0.05)
    caplog.set_level(logging.ERROR, logger="api.app")
    _SlowEmbedder.requests, _SlowEmbedder.dim = 0, stack_settings.vector_dim
    with serve(_SlowEmbedder) as url:
        settings = stack_settings.model_copy(update={
            "embedder": "http", "embedder_url": url, "embedding_dim": stack_settings.vector_dim})
        with TestClient(create_app(settings)) as client:
            assert client.get("/healthz").status_code == 200
            # the start-up load failed; the background retry's first attempt is in flight
            wait_for(lambda: _SlowEmbedder.requests >= 2, timeout=30,
                     what="the embedder's background retry to send its first attempt")
            sent_before_stop = _SlowEmbedder.requests
        # stopped: the retry loop ended with the attempt in flight, none came after it
        assert _SlowEmbedder.requests == sent_before_stop
    assert "took over" not in caplog.text, caplog.text
