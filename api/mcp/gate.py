"""Who may reach the HTTP transport: an ASGI layer in front of the SDK's app that lets a request
through only with a bearer key the API accepts (`GET /v1/me` answers 200), before the SDK reads
its body or serves any MCP message, `initialize` and `tools/list` included.

The MCP server may run on another host than the API and knows no keys: the API decides. A key
it accepted is remembered for `KEY_CHECK_TTL` seconds by the SHA-256 of the header (the key is
never stored or logged), so a client's calls do not cost one more API request each. That is
safe to cache: every tool call forwards the caller's key to the API, which checks it again, so
a revoked key loses its data at once and keeps at most the tool list for those seconds.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from pipeline.domain.errors import Unauthorized, Unavailable

log = logging.getLogger(__name__)

# Seconds an accepted key is taken on trust for the transport (see the module's docstring).
KEY_CHECK_TTL = 30.0
# Accepted keys remembered at once: one entry per key in use, so this is far above any real
# deployment's key count; past it the oldest entry goes.
KEY_CACHE_MAX = 4096
# Seconds the API may take to answer /v1/me (from memory, no database): past it the API is as
# good as down and the caller gets 503 to retry.
KEY_CHECK_TIMEOUT = 10.0


@dataclass(frozen=True)
class Refusal:
    """Why a request may not reach the MCP server: an HTTP status and the API's error shape."""

    status: int
    error: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)

    def response(self) -> JSONResponse:
        """The answer: `{"error": {"code", "message", "field"}}` with the status."""
        return JSONResponse({"error": dict(self.error)}, status_code=self.status,
                            headers=dict(self.headers))


def unauthorized(message: str, challenge: str = "Bearer") -> Refusal:
    """A 401 naming the Authorization header, with the challenge a client answers with a key."""
    return Refusal(401, {"code": Unauthorized.code, "message": message,
                         "field": "Authorization"}, {"WWW-Authenticate": challenge})


def key_digest(authorization: str) -> str:
    """What the cache and the log know of a caller's header: its SHA-256."""
    return hashlib.sha256(authorization.encode()).hexdigest()


class KeyCheck:
    """Asks the API whether a caller's bearer key is valid; remembers the keys it accepted."""

    def __init__(self, api_url: str, *, ttl: float = KEY_CHECK_TTL,
                 timeout: float = KEY_CHECK_TIMEOUT,
                 clock: Callable[[], float] = time.monotonic,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.api_url = api_url
        self.ttl = ttl
        self.timeout = timeout
        self.clock = clock
        self.transport = transport  # None: the network (a test passes a MockTransport)
        self._accepted: dict[str, float] = {}  # digest -> when the trust ends

    async def refusal(self, authorization: str | None) -> Refusal | None:
        """None when the API accepts this Authorization header; otherwise why not (401 for a
        missing or unknown key, 503 when the API does not answer, the API's own 4xx else)."""
        if not authorization or not authorization.lower().startswith("bearer ") \
                or not authorization[7:].strip():
            return unauthorized("missing bearer API key (Authorization: Bearer <key>)")
        digest = key_digest(authorization)
        if self._accepted.get(digest, 0.0) > self.clock():
            return None
        answer = await self._ask(authorization, digest)
        if answer is None:
            self._remember(digest)
        return answer

    async def _ask(self, authorization: str, digest: str) -> Refusal | None:
        """The API's verdict on the key: only the Authorization header goes, so a namespace the
        key may not use is the tool calls' 403, not the transport's."""
        try:
            async with httpx.AsyncClient(base_url=self.api_url, timeout=self.timeout,
                                         transport=self.transport) as http:
                response = await http.get("/v1/me", headers={"authorization": authorization})
        except httpx.HTTPError as exc:
            log.warning("the API at %s did not answer a key check (%s)", self.api_url,
                        type(exc).__name__)
            return Refusal(503, {"code": Unavailable.code, "field": None,
                                 "message": "the API did not answer the key check; retry later"})
        if response.is_success:
            return None
        if response.status_code == 401:
            log.info("refused an unknown key (sha256 %s...)", digest[:12])
            return unauthorized("unknown API key", 'Bearer error="invalid_token"')
        if response.status_code >= 500:
            log.warning("the API answered a key check with %d", response.status_code)
            return Refusal(503, {"code": Unavailable.code, "field": None,
                                 "message": "the API could not check the key; retry later"})
        return Refusal(response.status_code, _api_error(response),
                       {k: v for k, v in response.headers.items() if k.lower() == "retry-after"})

    def _remember(self, digest: str) -> None:
        """Trust this key for `ttl` seconds, within `KEY_CACHE_MAX` entries."""
        now = self.clock()
        if len(self._accepted) >= KEY_CACHE_MAX:
            self._accepted = {d: until for d, until in self._accepted.items() if until > now}
            while len(self._accepted) >= KEY_CACHE_MAX:
                del self._accepted[next(iter(self._accepted))]
        self._accepted[digest] = now + self.ttl


def _api_error(response: httpx.Response) -> Mapping[str, Any]:
    """The API's `{"error": {...}}` of a refusal, or one naming its status."""
    try:
        payload = response.json()
    except ValueError:
        payload = None
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict):
        return error
    return {"code": "http_error", "field": None,
            "message": f"the API answered {response.status_code} to the key check"}


class McpGate:
    """The ASGI app in front of the SDK's: every HTTP request passes `KeyCheck` first, before
    its body is read; lifespan events go straight through."""

    def __init__(self, app: ASGIApp, check: KeyCheck) -> None:
        self.app = app
        self.check = check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a request without a valid key; hand every other one to the SDK."""
        if scope["type"] == "http":
            refused = await self.check.refusal(Headers(scope=scope).get("authorization"))
            if refused is not None:
                await refused.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)
