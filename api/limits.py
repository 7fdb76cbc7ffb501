"""What one request may cost the API process, enforced by pure ASGI middleware before any route
runs (so before the body is parsed and before the API key is checked).

- `Deadline`: the whole request, body included, within `api_request_timeout` seconds; a body
  still arriving then is cut off with 408 `body_timeout`, anything else answers 503
  `request_timeout` (a slow or stuck request releases its connection and its key's slot).
- `KeyConcurrency`: at most `api_max_concurrent_per_key` requests of one API key in flight;
  one more answers 429 `too_many_requests` with Retry-After (one tenant cannot take every
  database connection of the process).
- `BodyLimit`: a body over `api_max_body_bytes` answers 413 `body_too_large` as soon as that is
  known: at once from Content-Length, else after the byte that crosses the limit (a chunked
  body is counted as it streams); the rest is never read, so memory stays bounded whatever is
  sent.

Errors have the API's one JSON shape (`{"error": {"code", "message", "field"}}`). Each limit is a
setting, documented in docs/operations.md ("Limits: API requests"); the limits hold per API
process.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Collection, Sequence

import psycopg
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import error_response
from pipeline.domain.errors import QueryTimeout
from pipeline.settings import Settings

log = logging.getLogger(__name__)

Headers = Sequence[tuple[bytes, bytes]]


def install(app: FastAPI, settings: Settings) -> None:
    """Add the limits to `app` (outermost last: the deadline covers everything, the body limit
    runs right before the routes) and map a cancelled statement to 503 `query_timeout`."""
    app.add_middleware(BodyLimit, max_bytes=settings.api_max_body_bytes)
    app.add_middleware(KeyConcurrency,
                       keys=set(settings.api_keys),
                       limit=settings.api_max_concurrent_per_key)
    app.add_middleware(Deadline, seconds=settings.api_request_timeout)
    app.exception_handler(psycopg.errors.QueryCanceled)(statement_timeout)


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
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its body was complete: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body: Message | None = {"type": "http.request", "body": b"".join(chunks),
                                "more_body": False}

        async def replay() -> Message:
            nonlocal body
            if body is None:
                return await receive()  # after the body: disconnect notices
            message, body = body, None
            return message

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        await send_error(send, 413, "body_too_large",
                         f"the request body is larger than {self.max_bytes} bytes",
                         field="body", headers=_CLOSE)


class KeyConcurrency:
    """429 `too_many_requests` for a request of a key that already has `limit` in flight.

    Only configured keys are counted (an unknown key costs no state here and gets its 401 from
    the routes); the count is this process's."""

    def __init__(self, app: ASGIApp, *, keys: Collection[str], limit: int) -> None:
        self.app = app
        self.keys = keys
        self.limit = limit
        self.in_flight: dict[str, int] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = _bearer(scope) if scope["type"] == "http" else None
        if key is None or key not in self.keys:
            await self.app(scope, receive, send)
            return
        running = self.in_flight.get(key, 0)
        if running >= self.limit:
            await send_error(send, 429, "too_many_requests",
                             f"this API key already has {self.limit} requests in flight",
                             field="Authorization", headers=((b"retry-after", b"1"),))
            return
        self.in_flight[key] = running + 1
        try:
            await self.app(scope, receive, send)
        finally:
            left = self.in_flight[key] - 1
            if left:
                self.in_flight[key] = left
            else:
                del self.in_flight[key]


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
