"""What one request may cost the API process, enforced by pure ASGI middleware before any route
runs (so before the body is read or parsed).

- `Deadline`: the whole request, body included, within `api_request_timeout` seconds; a body
  still arriving then is cut off with 408 `body_timeout`, anything else answers 503
  `request_timeout` (a slow or stuck request releases its connection and its key's slot).
- `Authenticated`: every route under /v1/ needs a known API key (`app.state.api_keys`);
  a missing or unknown one is answered 401 `unauthorized` before a byte of the body is read,
  and counts nowhere.
- `ProcessInFlight`: at most `MAX_IN_FLIGHT_PER_CONNECTION` x the read pool's size /v1/
  requests in flight in this process; one more answers 503 `overloaded` with Retry-After.
- `KeyConcurrency`: at most the key's `max_in_flight` requests in flight across
  every API process (counted in Redis, `pipeline/fairness/shared.py`; per process while Redis
  is down); one more answers 429 `too_many_requests` with Retry-After. The request then runs as
  its key's tenant: it holds at most its share of the read pool
  (`pipeline/fairness/connections.py`) and its publishes are rate-limited.
- `BodyLimit`: a body over `api_max_body_bytes` answers 413 `body_too_large` as soon as that is
  known: at once from Content-Length, else after the byte that crosses the limit (a chunked
  body is counted as it streams); the rest is never read, so memory stays bounded whatever is
  sent.

Errors have the API's one JSON shape (`{"error": {"code", "message", "field"}}`). The limits
are documented in docs/operations.md ("Limits: API requests").
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence

import psycopg
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import error_response
from pipeline.access import ApiKey
from pipeline.domain.errors import QueryTimeout
from pipeline.fairness.connections import ConnectionShare, share_of_pool
from pipeline.fairness.shared import SharedLimits
from pipeline.fairness.tenant import Tenant, acting_as, tenant_id
from pipeline.postgres.pool import POOL_WAIT_SECONDS
from pipeline.settings import Settings

log = logging.getLogger(__name__)

Headers = Sequence[tuple[bytes, bytes]]


# The /v1/ requests one API process keeps in flight, per connection of its read pool: enough to
# keep every connection busy with a queue behind it, few enough that memory stays bounded (each
# request may buffer a body of up to API_MAX_BODY_BYTES). An operator scales by adding
# processes (API_WORKERS), not by letting one queue longer.
MAX_IN_FLIGHT_PER_CONNECTION = 8
# A request's lease on its key's in-flight place outlives the request deadline by this much, so
# only a dead worker's leases ever expire.
LEASE_MARGIN_SECONDS = 5.0
API_PREFIX = "/v1/"


def install(app: FastAPI, settings: Settings) -> None:
    """Add the limits to `app` (outermost last: the deadline covers everything, the body limit
    runs right before the routes) and map a cancelled statement to 503 `query_timeout`.
    `app.state.shared_limits` and `app.state.api_keys` must be set."""
    share = ConnectionShare(share_of_pool(settings.api_pool_size),
                            wait_seconds=POOL_WAIT_SECONDS)
    app.add_middleware(BodyLimit, max_bytes=settings.api_max_body_bytes)
    keys: Mapping[str, ApiKey] = app.state.api_keys
    app.add_middleware(KeyConcurrency, limits=app.state.shared_limits, share=share, keys=keys)
    app.add_middleware(ProcessInFlight,
                       limit=MAX_IN_FLIGHT_PER_CONNECTION * settings.api_pool_size)
    app.add_middleware(Authenticated, known=keys.__contains__)
    app.add_middleware(Deadline, seconds=settings.api_request_timeout)
    app.exception_handler(psycopg.errors.QueryCanceled)(statement_timeout)


def shared_limits(settings: Settings) -> SharedLimits:
    """The per-key limits of `settings`, shared through the stack's Redis."""
    return SharedLimits(settings.result_set_redis_url,
                        lease_seconds=settings.api_request_timeout + LEASE_MARGIN_SECONDS)


async def statement_timeout(request: Request, exc: Exception) -> JSONResponse:
    """A statement Postgres cancelled outside `read_connection` (which maps it already)."""
    return error_response(QueryTimeout("the query ran past the read statement timeout"))


async def send_error(send: Send, status: int, code: str, message: str, *,
                     field: str | None = None, headers: Headers = ()) -> None:
    """Answer with the API's JSON error shape from inside an ASGI middleware."""
    body = json.dumps({"error": {"code": code, "message": message, "field": field}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


# The connection cannot be reused after a refused body (its rest is unread): say so, so the
# server closes it once the answer is out.
_CLOSE = ((b"connection", b"close"),)


class BodyLimit:
    """413 `body_too_large` for a body over `max_bytes`, before the app reads any of it.

    The body is received here (at most `max_bytes`) and replayed to the app, so neither
    FastAPI's parser nor the auth dependency ever sees more."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send)
            return
        chunks: list[Message] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its body was complete: nobody to answer
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(send)
                return
            chunks.append(message)
            if not message.get("more_body", False):
                break
        chunks.reverse()  # popped from the end, in arrival order

        async def replay() -> Message:
            if chunks:  # the body as it came, chunk by chunk: never joined into a copy
                return chunks.pop()
            return await receive()  # after the body: disconnect notices

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        await send_error(send, 413, "body_too_large",
                         f"the request body is larger than {self.max_bytes} bytes",
                         field="body", headers=_CLOSE)


class Authenticated:
    """401 `unauthorized` for a /v1/ request without a known API key, before its body is read
    (the routes check the key's namespaces and scopes; this only keeps strangers out early)."""

    def __init__(self, app: ASGIApp, *, known: Callable[[str], bool]) -> None:
        self.app = app
        self.known = known

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(API_PREFIX):
            await self.app(scope, receive, send)
            return
        key = _bearer(scope)
        if not key or not self.known(key):
            await send_error(send, 401, "unauthorized",
                             "missing bearer API key" if not key else "unknown API key",
                             field="Authorization",
                             headers=((b"www-authenticate", b"Bearer"), *_unread(scope)))
            return
        await self.app(scope, receive, send)


class ProcessInFlight:
    """503 `overloaded` for a /v1/ request while `limit` are in flight in this process."""

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(API_PREFIX):
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            await send_error(send, 503, "overloaded",
                             f"this API process has {self.limit} requests in flight",
                             headers=((b"retry-after", b"1"), *_unread(scope)))
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


class KeyConcurrency:
    """429 `too_many_requests` for a request of a key that already has its limit in flight
    across the API's processes (`SharedLimits`); an admitted request runs as its key's tenant
    (its connection share, its publish rate). The limits are the key's record's."""

    def __init__(self, app: ASGIApp, *, limits: SharedLimits, share: ConnectionShare,
                 keys: Mapping[str, ApiKey]) -> None:
        self.app = app
        self.limits = limits
        self.share = share
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = _bearer(scope) if scope["type"] == "http" else None
        record = self.keys.get(key) if key is not None else None
        if key is None or record is None or not scope["path"].startswith(API_PREFIX):
            await self.app(scope, receive, send)  # outside /v1/, or refused by Authenticated
            return
        tenant = Tenant(tenant_id(key), self.share, record.max_in_flight, record.publish_rate)
        admission = await self.limits.enter(tenant.id, tenant.max_in_flight)
        if admission is None:
            await send_error(send, 429, "too_many_requests",
                             f"this API key already has {tenant.max_in_flight} requests in "
                             "flight", field="Authorization",
                             headers=((b"retry-after", b"1"), *_unread(scope)))
            return
        try:
            with acting_as(tenant):
                await self.app(scope, receive, send)
        finally:
            await self.limits.leave(admission)


class Deadline:
    """The whole request within `seconds`: 408 `body_timeout` while its body is still arriving,
    503 `request_timeout` after (what the app was awaiting is cancelled)."""

    def __init__(self, app: ASGIApp, *, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = body_done = False

        async def watch_receive() -> Message:
            nonlocal body_done
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body", False):
                body_done = True
            return message

        async def watch_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        budget = asyncio.timeout(self.seconds)
        try:
            async with budget:
                await self.app(scope, watch_receive, watch_send)
        except TimeoutError:
            if not budget.expired():
                raise  # a timeout of the app's own, not the deadline
            if started:  # too late for an error answer: the server closes the connection
                log.warning("%s %s ran past the %ss deadline mid-response", scope["method"],
                            scope["path"], self.seconds)
            elif not body_done:
                await send_error(send, 408, "body_timeout",
                                 f"the request body did not arrive within {self.seconds}s",
                                 field="body", headers=_CLOSE)
            else:
                await send_error(send, 503, "request_timeout",
                                 f"the request did not finish within {self.seconds}s",
                                 headers=((b"retry-after", b"1"),))


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return bytes(value)
    return None


def _unread(scope: Scope) -> Headers:
    """`Connection: close` when the request may still have a body we leave unread."""
    if _header(scope, b"transfer-encoding") is not None or (_content_length(scope) or 0) > 0:
        return _CLOSE
    return ()


def _content_length(scope: Scope) -> int | None:
    raw = _header(scope, b"content-length")
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _bearer(scope: Scope) -> str | None:
    raw = _header(scope, b"authorization")
    if raw is None:
        return None
    text = raw.decode("latin-1")
    return text[7:].strip() if text.lower().startswith("bearer ") else None
