"""A progress line for long operations: done/total, rate and ETA, redrawn in place."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """`update(done)` redraws at most every `interval` seconds; `finish()` ends the line."""

    def __init__(self, label: str, total: int | None, *, stream: TextIO | None = None,
                 interval: float = 0.5) -> None:
        self.label = label
        self.total = total
        self.stream = stream or sys.stderr
        self.interval = interval
        self.started = time.monotonic()
        self._last_draw = 0.0
        self.done = 0

    def line(self) -> str:
        elapsed = max(1e-9, time.monotonic() - self.started)
        rate = self.done / elapsed
        if self.total:
            pct = 100.0 * self.done / self.total
            left = (self.total - self.done) / rate if rate > 0 else float("inf")
            eta = "?" if left == float("inf") else f"{left:,.0f}s"
            return (f"{self.label}: {self.done:,}/{self.total:,} ({pct:5.1f}%) "
                    f"{rate:,.0f}/s ETA {eta}")
        return f"{self.label}: {self.done:,} {rate:,.0f}/s"

    def update(self, done: int) -> None:
        self.done = done
        now = time.monotonic()
        if now - self._last_draw >= self.interval:
            self._last_draw = now
            self.stream.write("\r" + self.line() + " " * 4)
            self.stream.flush()

    def finish(self) -> None:
        self.stream.write("\r" + self.line() + f" in {time.monotonic() - self.started:,.1f}s\n")
        self.stream.flush()
