"""The threads the API publishes on: a bounded pool of its own, never asyncio's default one.

A publish blocks a thread for up to the broker's wait (bootstrap, then the flush of its events),
one at a time per producer. On the default executor a slow broker took every thread and the
Tantivy searches, query embeddings and snippets that share it queued behind; a request cut off
by its deadline left its thread waiting there all the same. Here a publish that finds every
thread busy is refused at once (`Overloaded`, 503 with Retry-After) instead of queueing, and a
thread counts as busy until its publish really ends, whatever became of the request.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from pipeline.domain.errors import Overloaded

P = ParamSpec("P")
T = TypeVar("T")

# Publishes wait one at a time per producer (the API has three: events, memory messages,
# entity decisions), so more threads than a few per producer would only wait on its lock.
PUBLISH_THREADS = 4


class PublishPool:
    """Runs blocking publishes on `threads` threads; `admit` (the per-key publish rate) is
    asked first."""

    def __init__(self, threads: int = PUBLISH_THREADS,
                 admit: Callable[[], Awaitable[None]] | None = None) -> None:
        self.threads = threads
        self._admit = admit
        self._free = threading.BoundedSemaphore(threads)
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="publish")

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args, **kwargs)` on a publishing thread (`Overloaded` when all are busy)."""
        if self._admit is not None:
            await self._admit()
        if not self._free.acquire(blocking=False):
            raise Overloaded(f"all {self.threads} publishing threads of this API process are "
                             "busy (the broker is slow)", retry_after=1)
        try:
            future: Future[T] = self._executor.submit(fn, *args, **kwargs)
        except BaseException:
            self._free.release()
            raise
        future.add_done_callback(lambda _: self._free.release())
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Stop taking publishes; those running end on their own (their threads are
        not waited for)."""
        self._executor.shutdown(wait=False, cancel_futures=True)
