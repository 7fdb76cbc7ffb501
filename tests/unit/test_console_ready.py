"""`up` says "ready" only once the API answers /healthz, not when its port is bound (uvicorn binds
it before its workers have started), and says so when the API is slow to answer."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from pipeline.domain.setting_values import local_http_url
from pipeline.supervisor.console import announce_when_answering


class _Api(http.server.BaseHTTPRequestHandler):
    """Answers 503 until `answering` is set, then 200; counts the calls."""

    answering = threading.Event()
    calls = 0

    def do_GET(self) -> None:
        type(self).calls += 1
        self.send_response(200 if self.answering.is_set() else 503)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[str]:
    _Api.answering.clear()
    _Api.calls = 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/healthz"
    finally:
        server.shutdown()
        server.server_close()


def test_ready_is_reported_after_the_first_200_and_a_slow_api_is_named(api: str) -> None:
    said: list[str] = []
    stopped = threading.Event()
    worker = threading.Thread(target=announce_when_answering, args=(api, said.append, "ready"),
                              kwargs={"stopped": stopped, "warn_after": 0.0})
    worker.start()
    try:
        while _Api.calls < 3:  # answered 503 three times: not ready, one warning
            stopped.wait(0.05)
        assert said == [f"the API has not answered {api} within 0 s: still waiting "
                        "(brainstream logs api)"]
        _Api.answering.set()
        worker.join(timeout=10)
        assert not worker.is_alive()
        assert said[-1] == "ready" and len(said) == 2
    finally:
        stopped.set()
        worker.join(timeout=5)


def test_nothing_is_said_when_up_stops_first() -> None:
    said: list[str] = []
    stopped = threading.Event()
    stopped.set()
    announce_when_answering("http://127.0.0.1:9/healthz", said.append, "ready",
                            stopped=stopped, warn_after=0.0)
    assert said == []


def test_the_api_is_asked_where_a_local_client_reaches_it() -> None:
    assert local_http_url("0.0.0.0", 8000) == "http://127.0.0.1:8000"
    assert local_http_url("::", 8000) == "http://127.0.0.1:8000"
    assert local_http_url("::1", 8000) == "http://[::1]:8000"
    assert local_http_url("10.0.0.2", 80) == "http://10.0.0.2:80"
