"""A network namespace of its own for one host (bench/harness/hosts.py), joined to the machine's
loopback by TCP forwards: a "gate" process.

A host in its own namespace has a loopback of its own, so it can listen on the same ports as
every other host (API 8000, metrics 9101...) and reaches nothing it was not given. The shared
services listen on the machine's loopback (and the embedded broker advertises 127.0.0.1), so the
gate listens inside the namespace on each service's port and forwards to the same port outside
(`--reach PORT`), and forwards a port outside to one inside (`--expose OUTER:INNER`: the host's
API, for its callers). One process holds both ends: a socket belongs to the namespace its thread
was in when it was made, so the gate switches its thread (setns) only to make a socket.

    python -m bench.harness.netns --reach 5432 --reach 9092 --expose 24930:8000

Prints "ready" on stdout once every listener is up; the namespace lives as long as the gate and
whatever was started in it (`nsenter --net=/proc/<gate pid>/ns/net -- ...`). Linux, as root.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable

CLONE_NEWNET = 0x40000000
_LIBC = ctypes.CDLL(None, use_errno=True)
CHUNK = 1 << 16


def usable() -> bool:
    """Whether this machine lets us make network namespaces (root, no seccomp refusal) and
    enter them (nsenter)."""
    if not sys.platform.startswith("linux") or shutil.which("nsenter") is None \
            or shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    try:
        return subprocess.run(["unshare", "-n", "true"], capture_output=True,
                              timeout=10, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _socket_in(ns_fd: int, home_fd: int) -> socket.socket:
    """A TCP socket of the namespace `ns_fd`; the thread goes back to `home_fd` after."""
    _check(_LIBC.setns(ns_fd, CLONE_NEWNET), "setns")
    try:
        return socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    finally:
        _check(_LIBC.setns(home_fd, CLONE_NEWNET), "setns back")


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            if writer.can_write_eof():
                writer.write_eof()


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _forward(port: int, target_ns: int, home_ns: int) -> Handler:
    """A connection handler that forwards to 127.0.0.1:`port` in namespace `target_ns`."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = _socket_in(target_ns, home_ns)
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        except OSError:
            sock.close()
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection(sock=sock)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        for w in (writer, up_writer):
            w.close()
    return handle


def _listener(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(256)
    sock.setblocking(False)
    return sock


async def serve(reach: list[int], expose: list[tuple[int, int]]) -> None:
    outside = os.open("/proc/self/ns/net", os.O_RDONLY)
    # the listeners outside first, while this thread is still there
    exposed = [(_listener(outer), inner) for outer, inner in expose]
    _check(_LIBC.unshare(CLONE_NEWNET), "unshare")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    inside = os.open("/proc/self/ns/net", os.O_RDONLY)
    servers = [await asyncio.start_server(_forward(port, outside, inside), sock=_listener(port))
               for port in reach]
    servers += [await asyncio.start_server(_forward(inner, inside, inside), sock=sock)
                for sock, inner in exposed]
    print("ready", flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


def _pair(text: str) -> tuple[int, int]:
    outer, _, inner = text.partition(":")
    return int(outer), int(inner or outer)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.harness.netns",
                                     description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--reach", type=int, action="append", default=[],
                        help="a port of the machine's loopback the namespace reaches")
    parser.add_argument("--expose", type=_pair, action="append", default=[],
                        help="OUTER:INNER: the machine's port OUTER forwards to INNER inside")
    args = parser.parse_args()
    asyncio.run(serve(args.reach, args.expose))


if __name__ == "__main__":
    main()
