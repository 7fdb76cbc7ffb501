"""The MCP transport's key check (api/mcp/gate.py) against a stand-in API (httpx's
MockTransport): what it remembers and for how long, and what it answers for each API answer.
The real stack's proof is test_mcp_http_gate.py; this pins the cache, which no end-to-end test
can observe without timing."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from api.mcp import gate
from api.mcp.gate import KeyCheck

GOOD = "Bearer good-secret-key"


class FakeApi:
    """/v1/me: 200 for GOOD, else the status it is told; counts the calls."""

    def __init__(self, other: int = 401) -> None:
        self.calls = 0
        self.other = other

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/me"
        assert set(request.headers) >= {"authorization"}
        assert "x-namespace" not in request.headers
        self.calls += 1
        if request.headers["authorization"] == GOOD:
            return httpx.Response(200, json={"namespaces": [], "admin": False})
        return httpx.Response(self.other, headers={"Retry-After": "1"}, json={"error": {
            "code": "too_many_requests" if self.other == 429 else "unauthorized",
            "message": "no", "field": None}})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _check(api: FakeApi, clock: Clock) -> KeyCheck:
    return KeyCheck("http://api.test", ttl=30.0, clock=clock,
                    transport=httpx.MockTransport(api.handle))


def test_an_accepted_key_is_remembered_for_the_ttl_by_its_digest_only(
        caplog: pytest.LogCaptureFixture) -> None:
    api, clock = FakeApi(), Clock()
    check = _check(api, clock)

    async def run() -> None:
        assert await check.refusal(GOOD) is None
        clock.now += 29
        assert await check.refusal(GOOD) is None
        assert api.calls == 1
        clock.now += 2
        assert await check.refusal(GOOD) is None
        assert api.calls == 2
        for _ in range(2):  # a refusal is never remembered: each one asks again
            with caplog.at_level(logging.INFO, logger="api.mcp.gate"):
                refused = await check.refusal("Bearer wrong-secret-key")
            assert refused is not None and refused.status == 401
            assert refused.headers["WWW-Authenticate"].startswith("Bearer")
        assert api.calls == 4

    asyncio.run(run())
    remembered = repr(check.__dict__)
    assert "good-secret-key" not in remembered
    assert "wrong-secret-key" not in caplog.text and "sha256" in caplog.text


def test_a_missing_bearer_is_refused_without_asking_the_api() -> None:
    api = FakeApi()
    check = _check(api, Clock())

    async def run() -> None:
        for header in (None, "", "Bearer", "Bearer   ", "Basic eDp5", "good-secret-key"):
            refused = await check.refusal(header)
            assert refused is not None and refused.status == 401, header
            assert refused.error["field"] == "Authorization"

    asyncio.run(run())
    assert api.calls == 0


def test_the_api_s_other_answers() -> None:
    async def run() -> None:
        busy = await _check(FakeApi(other=429), Clock()).refusal("Bearer other")
        assert busy is not None and (busy.status, busy.error["code"]) == (429, "too_many_requests")
        assert busy.headers == {"retry-after": "1"}
        broken = await _check(FakeApi(other=500), Clock()).refusal("Bearer other")
        assert broken is not None and (broken.status, broken.error["code"]) == (503, "unavailable")

    asyncio.run(run())


def test_the_cache_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate, "KEY_CACHE_MAX", 3)

    def accept_all(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={})

    clock = Clock()
    check = KeyCheck("http://api.test", clock=clock, transport=httpx.MockTransport(accept_all))

    async def run() -> None:
        for n in range(10):
            assert await check.refusal(f"Bearer key-{n}") is None
            clock.now += 1

    asyncio.run(run())
    assert len(check._accepted) <= 3
