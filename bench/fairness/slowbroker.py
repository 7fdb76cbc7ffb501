"""A slow broker for one client: a TCP proxy in front of the embedded broker that holds every
chunk the client sends for `delay` seconds before passing it on (in order), so each request the
client makes (bootstrap, metadata, produce) is answered `delay` seconds late.

A Kafka client bootstraps from the address it is given and then connects to the addresses the
broker advertises in its metadata answers: a plain proxy would see the bootstrap only. So the
proxy rewrites the broker's advertised port to its own in every answer frame (the host stays
`127.0.0.1`, the port is four bytes either way, so no length changes), and the client sends
everything through it. Only the process given the proxy's address (the API, through
BRAINSTREAM_KAFKA_BOOTSTRAP) is slowed; the pipeline talks to the broker directly.

It runs in a child process of its own (`serve`), so its work never shares the benchmark's
event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from multiprocessing.connection import Connection

_HOST = b"127.0.0.1"
_CHUNK = 65536


class SlowBroker:
    """The proxy: listens on a free loopback port, forwards to `upstream_port`."""

    def __init__(self, upstream_port: int, delay: float) -> None:
        self.upstream_port = upstream_port
        self.delay = delay
        self.port = 0
        self.connections = 0
        self.forwarded = 0  # bytes passed on to the broker

    async def start(self) -> asyncio.Server:
        """Listen; `self.port` is the port taken."""
        server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        return server

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        old = _HOST + struct.pack(">i", self.upstream_port)
        new = _HOST + struct.pack(">i", self.port)
        pumps = [asyncio.create_task(self._delayed(reader, up_writer)),
                 asyncio.create_task(_frames(up_reader, writer, old, new))]
        # either side closing ends the connection, as a broker's would
        _, pending = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        for w in (writer, up_writer):
            with contextlib.suppress(OSError):
                w.close()

    async def _delayed(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Client to broker: each chunk passed on `delay` seconds after it arrived, in order."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due, chunk = await queue.get()
                if not chunk:
                    return
                await asyncio.sleep(max(0.0, due - loop.time()))
                writer.write(chunk)
                await writer.drain()
                self.forwarded += len(chunk)

        sender = asyncio.create_task(send())
        try:
            while chunk := await reader.read(_CHUNK):
                queue.put_nowait((loop.time() + self.delay, chunk))
            queue.put_nowait((0.0, b""))
            await sender
        finally:
            sender.cancel()


async def _frames(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, old: bytes,
                  new: bytes) -> None:
    """Broker to client, a whole size-prefixed frame at a time, the advertised port
    replaced."""
    buffer = b""
    while chunk := await reader.read(_CHUNK):
        buffer += chunk
        while len(buffer) >= 4:
            end = 4 + int.from_bytes(buffer[:4], "big")
            if len(buffer) < end:
                break
            writer.write(buffer[:end].replace(old, new))
            buffer = buffer[end:]
        await writer.drain()


def serve(upstream_port: int, delay: float, conn: Connection) -> None:
    """A child process's body: run the proxy, send its port through `conn`, stop when the
    parent sends anything (or goes away)."""
    async def main() -> None:
        proxy = SlowBroker(upstream_port, delay)
        server = await proxy.start()
        conn.send(proxy.port)
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        loop.add_reader(conn.fileno(), stop.set)
        async with server:
            await stop.wait()
        conn.send(proxy.connections)

    asyncio.run(main())
