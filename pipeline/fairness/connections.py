"""How many pooled read connections one tenant may hold at once in one API process.

A search holds one connection per channel, so a few concurrent requests of one key could take
the whole pool and every other tenant's request would wait out the pool's timeout (503). Two
rules, both counted per process:

- each key holds at most `cap` connections (the pool less a reserve, `share_of_pool`);
- the reserve goes only to tenants that hold none: once tenants together hold `cap`, a tenant
  already holding one waits. So two (or ten) busy keys together, not only one, still leave a
  newcomer its first connection.

A tenant past either rule waits for a connection to come back, up to the pool's wait, then
answers 429. Connections taken outside a request (no tenant) are not counted here; the pool
itself bounds them.

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
    """At most `cap` read connections per tenant of this process, and past `cap` taken by all
    tenants together, a connection only for a tenant holding none (the reserve); waited for at
    most `wait_seconds` (then `TooManyRequests`)."""

    def __init__(self, cap: int, *, wait_seconds: float) -> None:
        self.cap = cap
        self.wait_seconds = wait_seconds
        self._held: dict[str, int] = {}
        self._total = 0
        self._waiters: set[asyncio.Future[None]] = set()

    def held(self, tenant: str) -> int:
        """The connections `tenant` holds now (for tests and metrics)."""
        return self._held.get(tenant, 0)

    def _may_take(self, tenant: str) -> bool:
        # a tenant holding none may always take one (the reserve is for it); a busy one only
        # while all tenants together hold fewer than `cap`, which also bounds it by `cap`
        return self._held.get(tenant, 0) == 0 or self._total < self.cap

    async def _take(self, tenant: str) -> None:
        loop = asyncio.get_running_loop()
        while not self._may_take(tenant):
            turn: asyncio.Future[None] = loop.create_future()
            self._waiters.add(turn)
            try:
                await turn
            finally:
                self._waiters.discard(turn)
        self._held[tenant] = self._held.get(tenant, 0) + 1
        self._total += 1

    def _give_back(self, tenant: str) -> None:
        # synchronous: a cancelled request can never leave its count behind
        left = self._held[tenant] - 1
        if left:
            self._held[tenant] = left
        else:
            del self._held[tenant]
        self._total -= 1
        for turn in self._waiters:  # each re-checks its own rule
            if not turn.done():
                turn.set_result(None)

    @asynccontextmanager
    async def connection(self, tenant: str) -> AsyncIterator[None]:
        """Hold one of `tenant`'s connections for the block."""
        if _HOLDING.get():  # nested: never wait on what this task may itself hold
            yield
            return
        try:
            async with asyncio.timeout(self.wait_seconds):
                await self._take(tenant)
        except TimeoutError:
            raise TooManyRequests(
                f"this API key holds {self.held(tenant)} database connections and none came "
                f"back within {self.wait_seconds:g}s (a key holds at most {self.cap}, fewer "
                "while other keys are busy)") from None
        token = _HOLDING.set(True)
        try:
            yield
        finally:
            _HOLDING.reset(token)
            self._give_back(tenant)
