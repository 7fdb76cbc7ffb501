"""The shared OpenAI-compatible client (pipeline/openai_compat) against a real HTTP server on
127.0.0.1 (tests/httpserve.py): 5xx, 408 and 429 are retried by its policy and then raised as
the caller's `unavailable`; other statuses and answers off the contract are the caller's
`refused`, never retried. The three callers (embedder, entity extractor, summariser) map the
same failures to their own errors and send their own bearer keys."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from pipeline.domain.errors import (
    BrainstreamError,
    EmbedderError,
    EmbedderUnavailable,
    ExtractorError,
    ExtractorUnavailable,
    Unavailable,
)
from pipeline.domain.memory_errors import SummariserError
from pipeline.domain.mentions import TextField
from pipeline.embedding.embedders import HttpEmbedder, build_embedder
from pipeline.entities.extractors import HttpExtractor, build_extractor
from pipeline.memory.summarisers import HttpSummariser, build_summariser
from pipeline.openai_compat import (
    CallerErrors,
    OpenAICompatClient,
    RetryPolicy,
    client as openai_client,
)
from pipeline.settings import Settings
from tests.httpserve import serve

RETRY = RetryPolicy(attempts=3, max_wait=0.05)
ERRORS = CallerErrors("embedder", "embedder_url", EmbedderUnavailable, EmbedderError)
CHAT_OK = {"choices": [{"message": {"role": "assistant", "content": '{"rows": []}'}}]}


@dataclass
class Script:
    """The statuses the server answers, in order (the last one repeats), and what it saw."""

    statuses: list[int] = field(default_factory=lambda: [200])
    answer: Any = field(default_factory=lambda: CHAT_OK)
    raw: bytes | None = None  # a body that is not JSON, sent with a 200
    delay: float = 0.0
    seen: list[tuple[str, str | None]] = field(default_factory=list)  # (path, auth header)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with script.lock:
                script.seen.append((self.path, self.headers.get("Authorization")))
                n = len(script.seen)
                status = script.statuses[min(n, len(script.statuses)) - 1]
            time.sleep(script.delay)
            body = script.raw if status == 200 and script.raw is not None else json.dumps(
                script.answer if status == 200 else {"error": {"message": f"status {status}"}}
            ).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            # the client may have given up already (the timeout case)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[Script, str]]:
    script = Script()
    with serve(_handler(script)) as url:
        yield script, url


@pytest.mark.parametrize("status", [500, 502, 503, 408, 429])
def test_transient_statuses_are_retried_then_unavailable(server: tuple[Script, str],
                                                          status: int) -> None:
    script, url = server
    script.statuses = [status]
    with OpenAICompatClient(url, "chat/completions", ERRORS, retry=RETRY) as client, \
            pytest.raises(EmbedderUnavailable) as exc:
        client.post({"messages": []})
    assert len(script.seen) == RETRY.attempts
    assert str(status) in exc.value.message and client.endpoint in exc.value.message


def test_a_transient_failure_that_passes_is_not_seen_by_the_caller(
        server: tuple[Script, str]) -> None:
    script, url = server
    script.statuses = [503, 500, 200]
    with OpenAICompatClient(url, "chat/completions", ERRORS, retry=RETRY) as client:
        assert client.post({"messages": []}) == CHAT_OK
    assert len(script.seen) == 3


@pytest.mark.parametrize("status", [400, 401, 404, 413, 422])
def test_client_errors_are_refused_at_once(server: tuple[Script, str], status: int) -> None:
    script, url = server
    script.statuses = [status, 200]
    with OpenAICompatClient(url, "chat/completions", ERRORS, retry=RETRY) as client, \
            pytest.raises(EmbedderError) as exc:
        client.post({"messages": []})
    assert not isinstance(exc.value, Unavailable)
    assert len(script.seen) == 1  # the 200 that would follow was never asked for


def test_an_answer_that_is_not_json_is_refused_at_once(server: tuple[Script, str]) -> None:
    script, url = server
    script.raw = b"<html>gateway says hi</html>"
    with OpenAICompatClient(url, "chat/completions", ERRORS, retry=RETRY) as client, \
            pytest.raises(EmbedderError, match="not JSON"):
        client.post({"messages": []})
    assert len(script.seen) == 1


def test_a_timeout_is_retried_then_unavailable(server: tuple[Script, str]) -> None:
    script, url = server
    script.delay = 0.5
    with OpenAICompatClient(url, "chat/completions", ERRORS, timeout=0.1,
                            retry=RetryPolicy(attempts=2, max_wait=0.05)) as client, \
            pytest.raises(EmbedderUnavailable, match="unreachable"):
        client.post({"messages": []})
    assert len(script.seen) == 2


def test_chat_json_reads_fenced_json_and_refuses_prose(server: tuple[Script, str]) -> None:
    script, url = server
    script.answer = {"choices": [{"message": {"content": '```json\n{"rows": [1]}\n```'}}]}
    with OpenAICompatClient(url, "chat/completions", ERRORS) as client:
        assert client.chat_json([{"role": "user", "content": "x"}]) == {"rows": [1]}
        script.answer = {"choices": [{"message": {"content": "Sure! Here you go."}}]}
        with pytest.raises(EmbedderError, match="content that is not JSON"):
            client.chat_json([{"role": "user", "content": "x"}])
        script.answer = {"choices": []}
        with pytest.raises(EmbedderError, match="no chat completion"):
            client.chat([{"role": "user", "content": "x"}])


ROW = [TextField("content", "Ada Lovelace wrote notes.")]
Call = Callable[[str, RetryPolicy], None]
CALLERS: dict[str, tuple[Call, type[BrainstreamError], type[BrainstreamError]]] = {
    "embedder": (lambda url, retry: HttpEmbedder(url, dim=4, retry=retry).embed(["x"]) and None,
                 EmbedderUnavailable, EmbedderError),
    "extractor": (lambda url, retry: HttpExtractor(url, retry=retry).extract([ROW]) and None,
                  ExtractorUnavailable, ExtractorError),
    "summariser": (lambda url, retry: HttpSummariser(url, retry=retry).summarise(
        None, ["Ana: hello"], 64) and None, Unavailable, SummariserError),
}


@pytest.mark.parametrize("caller", sorted(CALLERS))
def test_each_caller_maps_the_failures_to_its_own_errors(server: tuple[Script, str],
                                                         caller: str) -> None:
    script, url = server
    call, unavailable, refused = CALLERS[caller]
    retry = RetryPolicy(attempts=2, max_wait=0.05)
    script.statuses = [503]
    with pytest.raises(unavailable):
        call(url, retry)
    assert len(script.seen) == 2
    script.seen.clear()
    script.statuses = [400]
    with pytest.raises(refused) as exc:
        call(url, retry)
    assert not isinstance(exc.value, Unavailable)
    assert len(script.seen) == 1


def test_settings_give_every_caller_its_key_and_the_retry_policy(
        server: tuple[Script, str], monkeypatch: pytest.MonkeyPatch) -> None:
    script, url = server
    monkeypatch.setattr(openai_client, "MODEL_HTTP_RETRY", RetryPolicy(2, 0.05))
    settings = Settings.model_validate({
        "embedder": "http", "embedder_url": url, "embedding_dim": 4,
        "embedder_api_key": "embed-key", "entity_extractor": "http", "entity_http_url": url,
        "entity_http_api_key": "extract-key", "summariser": "http", "summariser_url": url,
        "summariser_api_key": "summary-key"})
    script.statuses = [503]
    embedder = build_embedder(settings)
    calls: list[Callable[[], object]] = [
        lambda: embedder.embed(["x"]),
        lambda: build_extractor(settings).extract([ROW]),
        lambda: build_summariser(settings, embedder).summarise(None, ["Ana: hi"], 64)]
    for call in calls:
        with pytest.raises(Unavailable):
            call()
    assert [auth for _, auth in script.seen] == [
        "Bearer embed-key"] * 2 + ["Bearer extract-key"] * 2 + ["Bearer summary-key"] * 2
