"""Per-key limits that hold across the API's worker processes: requests in flight and publishes
per second, counted in Redis (the stack's, the result sets' database).

- In flight: each admitted request is a lease in a sorted set per key, scored by when it
  expires (`lease_seconds`: past the request deadline, so a live request's lease never lapses);
  a worker killed mid-request leaks nothing for longer than that. Admission drops expired
  leases, counts, and adds, in one script.
- Publishes: a token bucket per key (`rate` per second, a burst of one second's worth, at
  least one).

When Redis cannot be reached the limits fall back to this process's own counts (the limit then
holds per process, as before), with one warning per outage, never an error to the caller;
Redis is asked again after `RETRY_SECONDS`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from pipeline.domain.errors import TooManyRequests
from pipeline.fairness.tenant import current_tenant

log = logging.getLogger(__name__)

RETRY_SECONDS = 5.0  # how long a failed Redis is left alone before it is asked again
# Redis calls on every request: a Redis that does not answer must cost little, then nothing
# (the fallback) until RETRY_SECONDS pass.
REDIS_TIMEOUT = 0.5
PREFIX = "brainstream:fair:"

_ENTER = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""

# Returns 0 when a token was taken, else the milliseconds until the next one.
_TAKE = """
local rate, burst, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = math.ceil((1 - tokens) / rate * 1000) end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(burst / rate) + 1)
return wait
"""


@dataclass(frozen=True)
class _Redis:
    loop: asyncio.AbstractEventLoop
    client: aioredis.Redis
    enter: AsyncScript
    take: AsyncScript


@dataclass(frozen=True)
class Admission:
    """One admitted request: released where it was counted (Redis or this process)."""

    tenant: str
    lease: str | None  # the Redis member; None when counted in this process


class SharedLimits:
    """The in-flight and publish limits of API keys, shared through Redis."""

    def __init__(self, url: str, *, lease_seconds: float) -> None:
        self.url = url
        self.lease_seconds = lease_seconds
        self._redis: _Redis | None = None
        self._down_until = 0.0
        self._warned = False
        self._local: dict[str, int] = {}
        self._buckets: dict[str, tuple[float, float]] = {}

    def _client(self) -> _Redis:
        """The Redis client of the running event loop (one app may be served by several loops
        in turn, as tests do; a client's connections belong to one)."""
        loop = asyncio.get_running_loop()
        if self._redis is None or self._redis.loop is not loop:
            client = aioredis.Redis.from_url(self.url, socket_timeout=REDIS_TIMEOUT,
                                             socket_connect_timeout=REDIS_TIMEOUT)
            self._redis = _Redis(loop, client, client.register_script(_ENTER),
                                 client.register_script(_TAKE))
        return self._redis

    async def enter(self, tenant: str, limit: int) -> Admission | None:
        """Admit one more request of `tenant` (None: it has `limit` in flight already)."""
        if self._redis_up():
            lease = uuid.uuid4().hex
            now = time.time()
            try:
                admitted = await self._client().enter(
                    keys=[f"{PREFIX}inflight:{tenant}"],
                    args=[now, limit, now + self.lease_seconds, lease,
                          math.ceil(self.lease_seconds) + 1])
            except (RedisError, OSError) as exc:
                self._failed(exc)
            else:
                self._recovered()
                return Admission(tenant, lease) if admitted else None
        running = self._local.get(tenant, 0)
        if running >= limit:
            return None
        self._local[tenant] = running + 1
        return Admission(tenant, None)

    async def leave(self, admission: Admission) -> None:
        """Give the request's place back (a lease Redis cannot take back expires)."""
        if admission.lease is None:
            left = self._local[admission.tenant] - 1
            if left:
                self._local[admission.tenant] = left
            else:
                del self._local[admission.tenant]
            return
        try:
            await self._client().client.zrem(f"{PREFIX}inflight:{admission.tenant}",
                                             admission.lease)
        except (RedisError, OSError) as exc:
            self._failed(exc)

    async def take_publish(self, tenant: str, rate: float) -> float:
        """Take one publish of `tenant`'s bucket, refilled at `rate` a second up to one
        second's worth: 0, or the seconds until it has one."""
        if self._redis_up():
            try:
                wait_ms = await self._client().take(keys=[f"{PREFIX}publish:{tenant}"],
                                           args=[rate, _burst(rate), time.time()])
            except (RedisError, OSError) as exc:
                self._failed(exc)
            else:
                self._recovered()
                return int(wait_ms) / 1000
        return self._take_local(tenant, rate)

    def _take_local(self, tenant: str, rate: float) -> float:
        now = time.monotonic()
        burst = _burst(rate)
        tokens, at = self._buckets.get(tenant, (burst, now))
        tokens = min(burst, tokens + max(0.0, now - at) * rate)
        if tokens >= 1:
            self._buckets[tenant] = (tokens - 1, now)
            return 0.0
        self._buckets[tenant] = (tokens, now)
        return (1 - tokens) / rate

    def _redis_up(self) -> bool:
        return time.monotonic() >= self._down_until

    def _failed(self, exc: Exception) -> None:
        self._down_until = time.monotonic() + RETRY_SECONDS
        if not self._warned:
            self._warned = True
            log.warning("redis cannot be reached (%s: %s): per-key limits hold per API "
                        "process until it answers again", type(exc).__name__, exc)

    def _recovered(self) -> None:
        if self._warned:
            self._warned = False
            log.warning("redis answers again: per-key limits hold across API processes")

    async def close(self) -> None:
        """Close the Redis connections (of the running loop's client)."""
        if self._redis is not None and self._redis.loop is asyncio.get_running_loop():
            await self._redis.client.aclose()
        self._redis = None

    async def check_publish(self) -> None:
        """Take a publish for the running request's tenant (`TooManyRequests` when its bucket
        is empty); outside a request, nothing."""
        tenant = current_tenant()
        if tenant is None:
            return
        wait = await self.take_publish(tenant.id, tenant.publish_rate)
        if wait > 0:
            raise TooManyRequests(f"this API key publishes at most {tenant.publish_rate:g} "
                                  "times a second", retry_after=max(1, math.ceil(wait)))


def _burst(rate: float) -> float:
    """A bucket holds one second's worth of publishes, at least one."""
    return max(1.0, rate)
