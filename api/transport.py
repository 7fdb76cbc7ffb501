"""The HTTP protocol uvicorn serves the API with: its own, with Nagle's algorithm off.

With `API_WORKERS` > 1 uvicorn binds the listening socket itself and hands it to the worker
processes; that socket's `proto` is 0, accepted sockets inherit it, and asyncio turns
`TCP_NODELAY` on only for sockets that say `IPPROTO_TCP` (uvicorn issue #3149). Each answer
then waits for the client's delayed ACK: about 45 ms on every keep-alive request but the first
(measured: `/healthz` 47 ms with two workers against 1.5 ms with one). Setting the option on
every accepted connection here makes both paths the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket

from uvicorn.protocols.http.auto import AutoHTTPProtocol

_TCP = (socket.AF_INET, socket.AF_INET6)


def no_delay(transport: asyncio.BaseTransport) -> None:
    """`TCP_NODELAY` on the transport's socket, when it is a TCP one (not a Unix socket)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in _TCP:
        with contextlib.suppress(OSError):  # the peer is gone already: the protocol notices
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class NoDelayHTTPProtocol(AutoHTTPProtocol):  # type: ignore[valid-type,misc]
    """uvicorn's HTTP protocol (httptools when installed, else h11), Nagle off first."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        no_delay(transport)
        super().connection_made(transport)


# what `brainstream api` passes to uvicorn as `http` (a worker process imports it by name)
HTTP_PROTOCOL = f"{__name__}:NoDelayHTTPProtocol"
