"""Read-your-writes across API processes and hosts: per namespace, the WAL position a read of
it must see (its "floor"), raised after each `wait: true` write of the namespace to the
primary's position once the write is applied, kept in Redis (the result sets' database) for a
few staleness bounds, and in this process as well.

A floor lives `ttl_seconds`: once the standby is within the staleness bound (lag <= bound)
it holds every write older than the bound, so a floor older than that says nothing more; and a
standby past the bound serves no reads at all. Floors never go down: of two writes the later
position wins, whatever order their processes record them in.

Floors are per namespace: one tenant's writes send only its own reads to the primary, and only
until the standby has replayed them.

When Redis cannot be reached a floor is unknown (`None`), and the read goes to the primary (a
write another process recorded could not be seen); Redis is asked again after
`RETRY_SECONDS`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

PREFIX = "brainstream:readfloor:"
RETRY_SECONDS = 5.0  # a failed Redis is left alone this long
REDIS_TIMEOUT = 0.5  # asked on reads: a Redis that does not answer must cost little

# Positions are stored as 16 hex digits, so Redis compares them as strings.
_RAISE = """
local now = redis.call('GET', KEYS[1])
if (not now) or now < ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
"""


def _text(position: int) -> str:
    return f"{position:016X}"


@dataclass(frozen=True)
class _Redis:
    loop: asyncio.AbstractEventLoop
    client: aioredis.Redis
    raise_to: AsyncScript


class ReadFloors:
    """The namespaces' read floors, shared through Redis (and kept in this process)."""

    def __init__(self, url: str, *, ttl_seconds: float) -> None:
        self.url = url
        self.ttl_seconds = ttl_seconds
        self._redis: _Redis | None = None
        self._down_until = 0.0
        self._local: dict[uuid.UUID, tuple[int, float]] = {}  # ns -> (position, expires)

    def _client(self) -> _Redis:
        """The client of the running event loop (a client's connections belong to one)."""
        loop = asyncio.get_running_loop()
        if self._redis is None or self._redis.loop is not loop:
            client = aioredis.Redis.from_url(self.url, socket_timeout=REDIS_TIMEOUT,
                                             socket_connect_timeout=REDIS_TIMEOUT)
            self._redis = _Redis(loop, client, client.register_script(_RAISE))
        return self._redis

    async def raise_to(self, namespace: uuid.UUID, position: int) -> None:
        """Reads of `namespace` must see `position` from now on (for `ttl_seconds`)."""
        now = time.monotonic()
        held = self._local_floor(namespace, now)
        self._local[namespace] = (max(held, position), now + self.ttl_seconds)
        if len(self._local) > 10_000:  # a process that writes to many namespaces
            self._local = {ns: v for ns, v in self._local.items() if v[1] > now}
        if now < self._down_until:
            return
        try:
            await self._client().raise_to(keys=[f"{PREFIX}{namespace}"],
                                          args=[_text(position),
                                                max(1, round(self.ttl_seconds * 1000))])
        except (RedisError, OSError) as exc:
            self._failed(exc)

    async def floor(self, namespace: uuid.UUID) -> int | None:
        """The position reads of `namespace` must see (0: none), None when Redis cannot say."""
        local = self._local_floor(namespace, time.monotonic())
        if time.monotonic() < self._down_until:
            return None
        try:
            shared = await self._client().client.get(f"{PREFIX}{namespace}")
        except (RedisError, OSError) as exc:
            self._failed(exc)
            return None
        return max(local, int(shared, 16) if shared else 0)

    def _local_floor(self, namespace: uuid.UUID, now: float) -> int:
        position, expires = self._local.get(namespace, (0, 0.0))
        return position if expires > now else 0

    def _failed(self, exc: Exception) -> None:
        if time.monotonic() >= self._down_until:
            log.warning("redis cannot be reached (%s: %s): reads of namespaces go to the "
                        "primary until it answers", type(exc).__name__, exc)
        self._down_until = time.monotonic() + RETRY_SECONDS

    async def close(self) -> None:
        """Close the Redis connections (of the running loop's client)."""
        if self._redis is not None and self._redis.loop is asyncio.get_running_loop():
            await self._redis.client.aclose()
        self._redis = None
