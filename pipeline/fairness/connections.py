"""How many pooled read connections one tenant may hold at once in one API process.

A search holds one connection per channel, so a few concurrent requests of one key could take
the whole pool and every other tenant's request would wait out the pool's timeout (503). Each
key may hold at most `cap` connections (the pool less a reserve, `share_of_pool`); past that,
its next statement waits for one of its own to come back, up to the pool's wait, then answers
429. Other tenants always find the reserve.

Deadlock-free: a task that waits here holds no connection of its own. A task that already holds
one (a statement run while another of its connections is open, or a task started inside such a
block) is not made to wait: it could be waiting on itself. Such nested connections are not
counted (none of today's read paths nest; the rule only keeps a future one from hanging).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar

from pipeline.domain.errors import TooManyRequests

# Connections of the pool no single key may take: at least one, a quarter of a large pool (the
# default pool of 8 leaves 6 to one key, 2 for everyone else; the floor pool of 2 leaves 1).
RESERVE_FRACTION = 4


def share_of_pool(pool_size: int) -> int:
    """The connections one key may hold of a pool of `pool_size` (at least 1)."""
    return max(1, pool_size - max(1, pool_size // RESERVE_FRACTION))


_HOLDING: ContextVar[bool] = ContextVar("brainstream_holding_connection", default=False)


class ConnectionShare:
    """At most `cap` read connections per tenant of this process, waited for at most
    `wait_seconds` (then `TooManyRequests`)."""

    def __init__(self, cap: int, *, wait_seconds: float) -> None:
        self.cap = cap
        self.wait_seconds = wait_seconds
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._held: dict[str, int] = {}

    def held(self, tenant: str) -> int:
        """The connections `tenant` holds now (for tests and metrics)."""
        return self._held.get(tenant, 0)

    @asynccontextmanager
    async def connection(self, tenant: str) -> AsyncIterator[None]:
        """Hold one of `tenant`'s connections for the block."""
        if _HOLDING.get():  # nested: never wait on what this task may itself hold
            yield
            return
        slots = self._slots.setdefault(tenant, asyncio.Semaphore(self.cap))
        try:
            async with asyncio.timeout(self.wait_seconds):
                await slots.acquire()
        except TimeoutError:
            raise TooManyRequests(
                f"this API key holds its share of database connections ({self.cap}) "
                f"and none came back within {self.wait_seconds:g}s") from None
        self._held[tenant] = self._held.get(tenant, 0) + 1
        token = _HOLDING.set(True)
        try:
            yield
        finally:
            _HOLDING.reset(token)
            self._held[tenant] -= 1
            slots.release()
