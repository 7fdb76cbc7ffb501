"""Fake HTTP dependencies for tests (an OpenAI-compatible embedding server, mostly): one way to
run a handler in a thread and one way to answer JSON, so every fake behaves alike."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# (request path, parsed JSON body) -> (status, JSON answer)
JsonAnswer = Callable[[str, dict[str, Any]], tuple[int, Any]]


@contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` on a free local port in a thread; yields the base URL (`http://host:port/v1`)
    and shuts the server down after."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, name="fake-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def json_handler(answer: JsonAnswer) -> type[BaseHTTPRequestHandler]:
    """A handler answering every POST with `answer(path, body)` as JSON."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            status, body = answer(self.path, json.loads(self.rfile.read(length) or b"{}"))
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
