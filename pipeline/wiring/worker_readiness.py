"""Readiness that every worker of one API instance agrees on.

`brainstream api` runs API_WORKERS processes behind one port; a load balancer's `/readyz`
reaches whichever accepts the connection, so one process's own answer says nothing of the
others (one may be wedged, or still loading). Each worker publishes its own readiness to Redis
every `HEARTBEAT_SECONDS`, as a member of its instance's sorted set scored by when the claim
expires; `/readyz` counts the live claims and is ready only when API_WORKERS workers are. A
worker that stops answering drops out after `CLAIM_SECONDS`; one that died drops out at once
(its pid is gone: the instance's workers share its host).

The instance is the uvicorn process that spawned the workers (`BRAINSTREAM_API_PARENT_PID`,
which `brainstream api` sets) on this host; Redis is the API's own database (the result sets').
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis

from pipeline.domain.setting_values import redact_credentials

log = logging.getLogger(__name__)

# Often enough that a wedged worker shows within seconds; a ping of each dependency per worker
# every 2 s costs nothing next to the requests.
HEARTBEAT_SECONDS = 2.0
# Three missed heartbeats: a worker busy on a long request still beats (the beat is a task of
# its event loop, which a request awaiting I/O does not hold), one stopped does not.
CLAIM_SECONDS = 3 * HEARTBEAT_SECONDS
KEY_PREFIX = "brainstream:api-ready"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process has this pid: not ours, but alive
        return True
    return True


class WorkerReadiness:
    """One worker's view of its instance's readiness tally in Redis."""

    def __init__(self, client: aioredis.Redis, instance: str, expected: int,
                 pid: int | None = None) -> None:
        self.client = client
        self.key = f"{KEY_PREFIX}:{instance}"
        self.expected = expected
        self.pid = pid or os.getpid()

    @classmethod
    def for_instance(cls, redis_url: str, expected: int,
                     parent: str | None) -> WorkerReadiness | None:
        """The tally of the `brainstream api` instance this process is a worker of (`parent`:
        the pid of its uvicorn process), or None when no such instance started it (one
        process: its own answer is the instance's)."""
        if not parent:
            return None
        client = aioredis.Redis.from_url(redis_url, socket_timeout=2, socket_connect_timeout=2)
        return cls(client, f"{socket.gethostname()}:{parent}", expected)

    async def publish(self, ready: bool) -> None:
        """Claim this worker ready for CLAIM_SECONDS, or withdraw its claim."""
        if ready:
            await self.client.zadd(self.key, {str(self.pid): time.time() + CLAIM_SECONDS})
            # the set outlives no instance for long: a key no one refreshes expires
            await self.client.expire(self.key, round(CLAIM_SECONDS * 10))
        else:
            await self.client.zrem(self.key, str(self.pid))

    async def count(self) -> int:
        """How many workers of the instance claim readiness now (expired claims and those of
        processes that died are removed first)."""
        now = time.time()
        await self.client.zremrangebyscore(self.key, "-inf", now)
        members = await self.client.zrangebyscore(self.key, now, "+inf")
        pids = [int(m) for m in members if isinstance(m, bytes | str)]
        dead = [str(pid) for pid in pids if not _alive(pid)]
        if dead:
            await self.client.zrem(self.key, *dead)
        return len(pids) - len(dead)

    async def heartbeat(self, is_ready: Callable[[], Awaitable[bool]]) -> None:
        """Publish this worker's readiness every HEARTBEAT_SECONDS until cancelled. A Redis
        that does not answer is logged once per outage: `/readyz` reports it."""
        failing = False
        while True:
            try:
                await self.publish(await is_ready())
                failing = False
            except Exception as exc:  # an outage of Redis or a dependency: beat again later
                if not failing:
                    log.warning("API readiness heartbeat failed: %s",
                                redact_credentials(f"{type(exc).__name__}: {exc}"))
                failing = True
            await asyncio.sleep(HEARTBEAT_SECONDS)

    async def close(self) -> None:
        """Withdraw this worker's claim (a worker that stops is no longer ready) and close."""
        try:
            await self.publish(False)
        except Exception as exc:  # Redis down: the claim expires on its own
            log.debug("readiness claim not withdrawn: %s", exc)
        await self.client.aclose()
