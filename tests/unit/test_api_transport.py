"""The API's HTTP protocol turns Nagle's algorithm off on every accepted TCP connection, also
on the pre-bound listening socket uvicorn hands its worker processes (API_WORKERS > 1), whose
accepted sockets asyncio leaves with Nagle on."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from uvicorn.config import Config
from uvicorn.importer import import_from_string

from api.transport import HTTP_PROTOCOL, NoDelayHTTPProtocol, no_delay


def _nodelay(sock: socket.socket) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_a_connection_accepted_from_uvicorns_bound_socket_gets_tcp_nodelay() -> None:
    config = Config("api.main:app", host="127.0.0.1", port=0, workers=2)
    listener = config.bind_socket()  # what the multiprocess supervisor hands each worker
    results: list[int] = []

    class Recorder(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
            no_delay(transport)
            results.append(_nodelay(transport.get_extra_info("socket")))
            transport.close()

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Recorder, sock=listener)
        port = listener.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(100):
            if results:
                break
            await asyncio.sleep(0.01)
        writer.close()
        server.close()

    asyncio.run(main())
    assert results and results[0] != 0


def test_a_unix_socket_is_left_alone() -> None:
    left, right = socket.socketpair()
    with left, right:
        class Transport:
            def get_extra_info(self, name: str) -> Any:
                return left if name == "socket" else None
        no_delay(Transport())  # type: ignore[arg-type]  # no OSError for a non-TCP socket


def test_brainstream_api_serves_with_this_protocol() -> None:
    assert import_from_string(HTTP_PROTOCOL) is NoDelayHTTPProtocol
    async def app(scope: Any, receive: Any, send: Any) -> None:
        return None

    config = Config(app, http=HTTP_PROTOCOL)
    config.load()
    assert config.http_protocol_class is NoDelayHTTPProtocol
