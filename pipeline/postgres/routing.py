"""Which server an API request's reads go to: the read standby (POSTGRES_READ_DSN) or the
primary.

A request's reads go to the standby when all of these hold, else to the primary:
- the request only reads (its namespace is held with the read scope; a request that writes,
  and everything it reads, stays on the primary);
- the standby answers and is within the staleness bound (POSTGRES_READ_MAX_LAG);
- the standby has replayed the namespace's read floor (`read_floors.py`: the primary's WAL
  position after the namespace's latest `wait: true` write) and the position the caller asked
  for (`X-Brainstream-Min-Lsn`).
The choice is made at the request's first read and kept for the rest of it (one request reads
one server). Outside a request (workers, the consumer, background builds) every read goes to
the primary.

The request carries its `ReadRoute` in a context variable, as it carries its tenant
(`pipeline/fairness/tenant.py`), so the stores keep calling `read_connection(pool)` with the
primary's pool and need no request passed down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from psycopg_pool import AsyncConnectionPool

from pipeline.postgres.lsn import parse_lsn
from pipeline.postgres.read_floors import ReadFloors
from pipeline.postgres.standby import LAG_PROBE_SECONDS, StandbyMonitor, StandbyState

log = logging.getLogger(__name__)

# A namespace's read floor outlives its write by this many staleness bounds (plus two probes):
# by then a standby within the bound has replayed it (read_floors.py).
READ_FLOOR_TTL_FACTOR = 4


def floor_ttl(max_lag: float) -> float:
    """How long a read floor is kept, for a staleness bound of `max_lag` seconds."""
    return READ_FLOOR_TTL_FACTOR * max_lag + 2 * LAG_PROBE_SECONDS


@dataclass
class ReadRoute:
    """One API request's reads: its namespace once known, the position its caller asked to
    see, whether it writes, the router of the services it runs on, and the pool its reads go to
    (chosen at its first read)."""

    min_lsn: int = 0
    namespace: uuid.UUID | None = None
    writes: bool = False
    router: ReadRouter | None = None
    chosen: AsyncConnectionPool[Any] | None = None


_CURRENT: ContextVar[ReadRoute | None] = ContextVar("brainstream_read_route", default=None)


def current_route() -> ReadRoute | None:
    """The running request's route (None outside a request)."""
    return _CURRENT.get()


@contextlib.contextmanager
def routing(route: ReadRoute) -> Iterator[None]:
    """Run the block (a request) with `route`."""
    token = _CURRENT.set(route)
    try:
        yield
    finally:
        _CURRENT.reset(token)


class ReadRouter:
    """The read side's two servers: the primary's pool and, when one is configured, the
    standby's pool and its monitor; and the namespaces' read floors."""

    def __init__(self, primary: AsyncConnectionPool[Any], floors: ReadFloors, *,
                 standby: AsyncConnectionPool[Any] | None = None,
                 monitor: StandbyMonitor | None = None) -> None:
        self.primary = primary
        self.standby = standby
        self.monitor = monitor
        self.floors = floors
        self._probing: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Measure the standby once (reads may use it from the first request), then keep
        measuring it in the background."""
        if self.monitor is not None:
            await self.monitor.probe()
            self._probing = asyncio.get_running_loop().create_task(self.monitor.run())

    def state(self) -> StandbyState | None:
        """The standby as last probed (None without one)."""
        return None if self.monitor is None else self.monitor.state

    async def pool_for(self, route: ReadRoute) -> AsyncConnectionPool[Any]:
        """The pool `route`'s reads go to (chosen once per request)."""
        if route.chosen is None:
            route.chosen = await self._choose(route)
        return route.chosen

    async def _choose(self, route: ReadRoute) -> AsyncConnectionPool[Any]:
        monitor = self.monitor
        if self.standby is None or monitor is None or route.writes or route.namespace is None:
            return self.primary
        if not monitor.state.serves(monitor.max_lag):
            return self.primary
        floor = await self.floors.floor(route.namespace)
        if floor is None:  # Redis cannot say what the namespace's writers recorded
            return self.primary
        needed = max(floor, route.min_lsn)
        if needed and not await monitor.has_replayed(needed):
            return self.primary
        return self.standby

    def standby_failed(self, route: ReadRoute, exc: BaseException) -> AsyncConnectionPool[Any]:
        """A standby connection could not be had: the standby counts as down and the request
        reads the primary."""
        if self.monitor is not None:
            self.monitor.failed(exc)
        route.chosen = self.primary
        return self.primary

    async def record_write(self, namespace: uuid.UUID) -> int | None:
        """After a `wait: true` write of `namespace` was applied: the primary's WAL position,
        raised into the namespace's read floor (None when the primary did not answer: the
        write is applied, its position unknown)."""
        try:
            async with self.primary.connection(timeout=2.0) as conn:
                row = await (await conn.execute("SELECT pg_current_wal_lsn()::text")).fetchone()
        except Exception as exc:
            log.warning("the primary's WAL position after a write is unknown: %s", exc)
            return None
        assert row is not None
        position = parse_lsn(row[0])
        await self.floors.raise_to(namespace, position)
        return position

    async def stop(self) -> None:
        """Stop measuring the standby (its last state stays until `start` again)."""
        if self._probing is not None:
            self._probing.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._probing
            self._probing = None

    async def close(self) -> None:
        """Stop measuring, close the standby's pool and the floors' Redis connections (the
        primary's pool is its owner's to close)."""
        await self.stop()
        if self.monitor is not None:
            await self.monitor.close()
        if self.standby is not None:
            await self.standby.close()
        await self.floors.close()
