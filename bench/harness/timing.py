"""Latency measurements: percentiles, and a set of calls timed under a given concurrency.

Tests never assert wall-clock times; a benchmark prints these figures next to a baseline measured
in the same run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from bench.harness.runenv import log

T = TypeVar("T")


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation; infinities allowed."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    if rank == low:
        return ordered[low]  # also keeps an infinite neighbour from turning it into NaN
    return ordered[low] + (ordered[low + 1] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class Timing:
    """Latencies (seconds) of `count` calls made by `concurrency` workers in `wall` seconds."""

    name: str
    concurrency: int
    latencies: tuple[float, ...]
    wall: float
    errors: int = 0
    # CPU-seconds the serving processes spent during the run, where measured (0: not measured)
    cpu: float = 0.0

    @property
    def count(self) -> int:
        return len(self.latencies)

    def ms(self, q: float) -> float:
        """The q-th percentile latency in milliseconds."""
        return percentile(self.latencies, q) * 1000.0

    @property
    def throughput(self) -> float:
        """Calls per second over the run's wall time."""
        return self.count / self.wall if self.wall > 0 else 0.0


async def run_concurrent(name: str, call: Callable[[T], Awaitable[object]],
                         inputs: Sequence[T], concurrency: int,
                         budget: float | None = None) -> Timing:
    """Call `call` on every input with `concurrency` workers pulling from one queue; each call's
    latency is measured around its await, the wall time from the first start to the last end.
    With a `budget` (seconds), no call starts after it ran out (so a very slow operation is
    measured on fewer calls instead of stalling the benchmark)."""
    queue: asyncio.Queue[T] = asyncio.Queue()
    for item in inputs:
        queue.put_nowait(item)
    latencies: list[float] = []
    errors = 0

    async def worker() -> None:
        nonlocal errors
        while True:
            if deadline is not None and time.perf_counter() > deadline:
                return
            try:
                item = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            start = time.perf_counter()
            try:
                await call(item)
            except Exception as exc:  # counted and shown once; a benchmark must not hide them
                errors += 1
                if errors == 1:
                    log(f"{name}: first error: {exc!r}")
                continue
            latencies.append(time.perf_counter() - start)

    started = time.perf_counter()
    deadline = None if budget is None else started + budget
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - started
    return Timing(name, concurrency, tuple(latencies), wall, errors)
