"""Read-your-writes on the API: every /v1/ request runs with a `ReadRoute`
(`pipeline/postgres/routing.py`), which the access dependencies fill in (the namespace; whether
the request writes) and the first read decides (standby or primary).

A caller may ask its reads to see a WAL position (`X-Brainstream-Min-Lsn`, as a `wait: true`
write answered it in `X-Brainstream-Lsn`): a read then goes to the primary until the standby has
replayed it. A header that is no LSN is answered 400 `invalid_header` naming it, before any
route runs."""

from __future__ import annotations

import uuid

from starlette.types import ASGIApp, Receive, Scope, Send

from api.limits import API_PREFIX, send_error
from pipeline.postgres.lsn import LSN_FORMAT, format_lsn, parse_lsn
from pipeline.postgres.routing import ReadRoute, routing
from pipeline.wiring import Services

# The WAL position a `wait: true` write's answer carries, and the one a read may ask to see.
LSN_HEADER = "X-Brainstream-Lsn"
MIN_LSN_HEADER = "X-Brainstream-Min-Lsn"
_MIN_LSN = MIN_LSN_HEADER.lower().encode()


class ReadRouting:
    """Runs each /v1/ request with its own `ReadRoute` (and the position it asked to see)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(API_PREFIX):
            await self.app(scope, receive, send)
            return
        route = ReadRoute()
        given = [v for k, v in scope["headers"] if k == _MIN_LSN]
        if given:
            try:
                if len(given) > 1:
                    raise ValueError("given more than once")
                route.min_lsn = parse_lsn(given[0].decode("latin-1"))
            except ValueError as exc:
                await send_error(send, 400, "invalid_header",
                                 f"{MIN_LSN_HEADER}: {exc}" if len(given) > 1 else
                                 f"{MIN_LSN_HEADER}: an LSN is {LSN_FORMAT}",
                                 field=MIN_LSN_HEADER)
                return
        with routing(route):
            await self.app(scope, receive, send)


async def applied_write_headers(svc: Services, ns: uuid.UUID) -> dict[str, str]:
    """After a `wait: true` write of `ns` was applied: its reads must see the primary's WAL
    position from now on (on every API process), and the answer carries that position (none
    when the primary did not say it)."""
    position = await svc.reads.record_write(ns)
    return {} if position is None else {LSN_HEADER: format_lsn(position)}
