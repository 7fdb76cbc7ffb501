"""What one relay run did (`OutboxRelay.run`, pipeline/outbox/relay.py): its task's result."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class RelayStats:
    rows: int = 0
    nodes_upserted: int = 0
    nodes_deleted: int = 0
    edges_upserted: int = 0
    edges_deleted: int = 0
    changes: int = 0
    failed_rounds: int = 0
    rows_retrying: int = 0  # refused by the graph, tried again after a back-off
    rows_failed: int = 0  # refused on every try: marked failed and dead-lettered
    retired: int = 0  # rows of a retired op, marked done unapplied (`ops.RETIRED_OPS`)
    skipped: bool = False
    errors: list[str] = field(default_factory=list)
    rounds: int = 0
    coalesced: int = 0  # rows claimed with an earlier row of their aggregate (`claim_due`)
    # where a run's time went: claiming; objects and links (Postgres reads, graph writes);
    # change events; marking rows done
    seconds: dict[str, float] = field(default_factory=dict)

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Adds the seconds of a `with` block to `seconds[phase]`."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] = round(self.seconds.get(phase, 0.0)
                                        + time.perf_counter() - start, 3)
