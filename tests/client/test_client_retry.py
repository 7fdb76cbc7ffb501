"""The client's retries and errors, on `httpx.MockTransport` (a shell's unit test: the live
suite shows the real API's answers): 503 and 429 are retried with back-off and jitter, a
Retry-After wins, what outlasts the retries raises `Unavailable`; a connection that cannot be
made is retried, a request that may have arrived is retried only when repeating it is
harmless; a 4xx raises `ApiError` with the API's code, field and message, at once."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from brainstream_client import ApiError, AsyncClient, Client, ConnectionFailed, Unavailable
from brainstream_client.retry import RetryPolicy, parse_retry_after

Handler = Callable[[httpx.Request], httpx.Response]

PAGE = {"objects": [], "result_set_id": None, "has_more": False}
DOWN = {"error": {"code": "dependency_unavailable", "message": "retry later", "field": None}}


def _script(*answers: httpx.Response | Exception) -> tuple[Handler, list[httpx.Request]]:
    """A handler giving `answers` in turn (an exception is raised), and the requests seen."""
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers[len(seen) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return handle, seen


@pytest.fixture()
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits the sync client asked for (none really waited)."""
    waits: list[float] = []
    monkeypatch.setattr("brainstream_client.client._sleep", waits.append)
    return waits


def _client(handler: Handler, **policy: Any) -> Client:
    return Client("http://api.test", api_key="k", transport=httpx.MockTransport(handler),
                  retry=RetryPolicy(rng=random.Random(7), **policy))


def test_503_is_retried_with_growing_jittered_waits(slept: list[float]) -> None:
    handler, seen = _script(httpx.Response(503, json=DOWN), httpx.Response(503, json=DOWN),
                            httpx.Response(503, json=DOWN), httpx.Response(200, json=PAGE))
    with _client(handler, base=1.0, cap=100.0) as client:
        page = client.search("acme")
    assert page.objects == [] and len(seen) == 4
    # each wait is half the back-off plus up to the other half: 1, 2, 4 s back-offs
    for wait, backoff in zip(slept, (1.0, 2.0, 4.0), strict=True):
        assert backoff / 2 <= wait <= backoff
    assert json.loads(seen[-1].content) == {"query": "acme", "limit": 10, "mode": "hybrid",
                                            "explain": False, "strict": False}
    assert seen[0].headers["Authorization"] == "Bearer k"


def test_retry_after_replaces_the_back_off(slept: list[float]) -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    handler, _ = _script(httpx.Response(503, json=DOWN, headers={"Retry-After": "7"}),
                         httpx.Response(429, json=DOWN, headers={"Retry-After": later}),
                         httpx.Response(503, json=DOWN, headers={"Retry-After": "3600"}),
                         httpx.Response(200, json=PAGE))
    with _client(handler, max_retry_after=60.0) as client:
        client.find_exact("acme")
    assert slept[0] == 7.0
    assert 20.0 < slept[1] <= 30.0  # an HTTP date: the time until then
    assert slept[2] == 60.0  # bounded by max_retry_after


def test_what_outlasts_the_retries_is_unavailable(slept: list[float]) -> None:
    handler, seen = _script(*[httpx.Response(503, json=DOWN)] * 3)
    with _client(handler, attempts=3) as client, pytest.raises(Unavailable) as raised:
        client.read("6f1c3f76-35a5-4a79-9b8a-1f4b2d0c9e11")
    assert (raised.value.status, raised.value.code) == (503, "dependency_unavailable")
    assert len(seen) == 3 and len(slept) == 2


def test_a_4xx_raises_api_error_at_once(slept: list[float]) -> None:
    refused = {"error": {"code": "invalid_request", "message": "limit: too big",
                         "field": "limit"}}
    handler, seen = _script(httpx.Response(422, json=refused))
    with _client(handler) as client, pytest.raises(ApiError) as raised:
        client.search("acme", limit=1000)
    error = raised.value
    assert (error.status, error.code, error.field, error.message) == (
        422, "invalid_request", "limit", "limit: too big")
    assert not isinstance(error, Unavailable) and len(seen) == 1 and slept == []


def test_an_answer_not_in_the_api_shape_keeps_its_status(slept: list[float]) -> None:
    handler, _ = _script(httpx.Response(404, text="<html>no such page</html>"))
    with _client(handler) as client, pytest.raises(ApiError) as raised:
        client.healthz()
    assert (raised.value.status, raised.value.code) == (404, "http_error")
    assert "no such page" in raised.value.message


def test_a_connection_that_cannot_be_made_is_retried(slept: list[float]) -> None:
    handler, seen = _script(httpx.ConnectError("refused"), httpx.ConnectError("refused"),
                            httpx.Response(200, json={"status": "ok"}))
    with _client(handler) as client:
        assert client.healthz() == {"status": "ok"}
    assert len(seen) == 3 and len(slept) == 2


def test_a_request_that_may_have_arrived_is_retried_only_when_harmless(slept: list[float]
                                                                         ) -> None:
    merged = {"from": "6f1c3f76-35a5-4a79-9b8a-1f4b2d0c9e11",
              "into": "0c8b3f76-35a5-4a79-9b8a-1f4b2d0c9e12", "dry_run": False, "mentions": 1,
              "aliases": 0, "edges_moved": 0, "edges_dropped": 0, "objects": [],
              "merge_id": 1, "part_count": 1}
    handler, seen = _script(httpx.ReadTimeout("slow"), httpx.Response(200, json=merged))
    # a merge done twice is not a merge done once: not repeated
    with _client(handler) as client, pytest.raises(ConnectionFailed):
        client.merge_entities(merged["from"], merged["into"])
    assert len(seen) == 1
    handler, seen = _script(httpx.ReadTimeout("slow"), httpx.Response(200, json=PAGE))
    with _client(handler) as client:
        client.search("acme")  # a read: retried
    assert len(seen) == 2


def test_readiness_503_is_an_answer_not_an_error(slept: list[float]) -> None:
    down = {"status": "unavailable", "dependencies": {"postgres": "down"},
            "code": "dependency_unavailable"}
    handler, seen = _script(httpx.Response(503, json=down))
    with _client(handler) as client:
        assert client.readyz()["dependencies"] == {"postgres": "down"}
    assert len(seen) == 1 and slept == []


def test_the_async_client_retries_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("brainstream_client.aio._sleep", record)
    refused = {"error": {"code": "invalid_request", "message": "limit: too small",
                         "field": "limit"}}
    handler, seen = _script(httpx.Response(503, json=DOWN, headers={"Retry-After": "2"}),
                            httpx.ConnectError("refused"), httpx.Response(200, json=PAGE),
                            httpx.Response(422, json=refused))

    async def run() -> None:
        async with AsyncClient("http://api.test", api_key="k",
                               transport=httpx.MockTransport(handler)) as client:
            assert (await client.search("acme")).has_more is False
            with pytest.raises(ApiError) as raised:
                await client.children("6f1c3f76-35a5-4a79-9b8a-1f4b2d0c9e11", limit=0)
            assert (raised.value.status, raised.value.field) == (422, "limit")

    asyncio.run(run())
    assert len(seen) == 4 and waits[0] == 2.0 and len(waits) == 2


def test_retry_after_parsing() -> None:
    now = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    assert parse_retry_after("5", now) == 5.0
    assert parse_retry_after(format_datetime(now + timedelta(seconds=90), usegmt=True),
                             now) == 90.0
    assert parse_retry_after(format_datetime(now - timedelta(seconds=90), usegmt=True),
                             now) == 0.0
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None
