"""A `GraphReader` that survives FalkorDB being down: it connects on first use and again after
the graph was unreachable, so an API started while FalkorDB is down recovers by itself."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from pipeline.domain.errors import GraphUnavailable, Unavailable
from pipeline.domain.read_model import Direction, EdgeHit, Hit, Neighbor
from pipeline.graph.falkordb.reader import FalkorGraphReader
from pipeline.graph.falkordb.settings import GraphSettings

T = TypeVar("T")


class ReconnectingGraphReader:
    """`GraphReader` over a `FalkorGraphReader` made on demand, and made again after an outage.

    While FalkorDB is down, connecting takes seconds (the client's synchronous probe retries
    with back-off: about 4 s to a refused port). So one caller at a time probes, at most every
    `retry_after` seconds, and every other caller gets `GraphUnavailable` at once: the answers
    degrade (`graph_unavailable`) without waiting, and readiness answers at once.
    """

    def __init__(self, settings: GraphSettings, retry_after: float = 2.0) -> None:
        self.settings = settings
        self.retry_after = retry_after
        self._reader: FalkorGraphReader | None = None
        self._connecting = False
        self._down_until = 0.0
        self._last_error = ""

    def _mark_down(self, exc: Unavailable) -> None:
        self._reader = None
        self._down_until = time.monotonic() + self.retry_after
        self._last_error = exc.message

    async def reader(self) -> FalkorGraphReader:
        """The connected reader; GraphUnavailable while the graph is (or was just) unreachable."""
        if self._reader is not None:
            return self._reader
        if self._connecting or time.monotonic() < self._down_until:
            raise GraphUnavailable(f"graph unreachable: {self._last_error or 'connecting'}")
        self._connecting = True  # one event loop: no await between the check and the flag
        try:
            reader = await asyncio.to_thread(FalkorGraphReader.from_settings, self.settings)
        except Unavailable as exc:
            self._mark_down(exc)
            raise
        finally:
            self._connecting = False
        self._reader = reader
        return reader

    async def _call(self, call: Callable[[FalkorGraphReader], Awaitable[T]]) -> T:
        """`call` on the connected reader; an outage it meets makes a later call reconnect."""
        reader = await self.reader()
        try:
            return await call(reader)
        except Unavailable as exc:
            self._mark_down(exc)
            raise

    async def find_entities_text(self, namespace: uuid.UUID, query: str,
                                 kinds: Sequence[str], k: int) -> list[Hit]:
        return await self._call(lambda r: r.find_entities_text(namespace, query, kinds, k))

    async def find_entities_vector(self, namespace: uuid.UUID, vector: Sequence[float],
                                   kinds: Sequence[str], k: int) -> list[Hit]:
        return await self._call(lambda r: r.find_entities_vector(namespace, vector, kinds, k))

    async def find_edges(self, namespace: uuid.UUID, relation_type: str, query: str,
                         k: int) -> list[EdgeHit]:
        return await self._call(lambda r: r.find_edges(namespace, relation_type, query, k))

    async def neighbors(self, namespace: uuid.UUID, seeds: Sequence[uuid.UUID],
                        relation_types: Sequence[str], direction: Direction, max_hops: int,
                        limit: int) -> list[Neighbor]:
        return await self._call(lambda r: r.neighbors(namespace, seeds, relation_types,
                                                      direction, max_hops, limit))

    async def ping(self) -> None:
        """Whether the graph answers now (its capabilities, re-read); raises when it does not."""
        await self._call(lambda r: r.capabilities(refresh=True))

    async def aclose(self) -> None:
        """Close the connected reader's client, if any."""
        if self._reader is not None:
            await self._reader.aclose()
            self._reader = None
