"""Follows the active index generation: the read side's services are rebuilt for the new
generation when `brainstream replay` (or an operator) switches it, without a restart."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from pipeline.generations.active import active_generation
from pipeline.settings import Settings
from pipeline.wiring.services import Services, build_services

log = logging.getLogger(__name__)


class ActiveServices:
    """Follows the active index generation: one `Services` per generation, the pointer re-read
    every `ttl` seconds in the background. A switch builds the new generation's services first
    (pools, graph reader, its embedder) and then swaps them in, so no request is answered from a
    half-built generation nor waits for the build; the old services close after `grace`
    seconds (requests in flight finish on them)."""

    def __init__(self, base: Settings, publish: Callable[[Services], None], *,
                 ttl: float = 1.0, grace: float = 30.0) -> None:
        self.base = base
        self.publish = publish  # called with the new Services (the API sets app.state.services)
        self.ttl = ttl
        self.grace = grace
        self.current: Services | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._retired: list[Services] = []

    async def start(self) -> Services:
        """Build and publish the active generation's services, then follow the pointer."""
        gen = await asyncio.to_thread(active_generation, self.base)
        self.current = await build_services(gen.settings(self.base))
        self.publish(self.current)
        self._spawn(self._follow())
        return self.current

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(self.ttl)
            try:
                gen = await asyncio.to_thread(active_generation, self.base)
                if self.current is None or gen.id == self.current.settings.generation:
                    continue
                fresh = await build_services(gen.settings(self.base))
            except Exception as exc:  # keep serving the current generation; retry next tick
                log.warning("cannot follow the active generation: %s", exc)
                continue
            old, self.current = self.current, fresh
            self.publish(fresh)
            log.info("reads switched to index generation %d", gen.id)
            self._retired.append(old)
            self._spawn(self._close_later(old))

    async def _close_later(self, old: Services) -> None:
        await asyncio.sleep(self.grace)
        if old in self._retired:
            self._retired.remove(old)
            await old.close()

    async def close(self) -> None:
        """Stop following and close every generation's services still open."""
        for task in list(self._tasks):
            task.cancel()
        for svc in [*self._retired, *([self.current] if self.current else [])]:
            await svc.close()
        self._retired.clear()
