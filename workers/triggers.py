"""The consumer's side of the workers: send tasks by name over Redis (no worker code imported)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from celery import Celery

from workers.app import (
    EMBED_TASK,
    EXTRACT_QUEUE,
    EXTRACT_TASK,
    MEMORY_TASK,
    RELAY_QUEUE,
    RELAY_TASK,
)

# Roots per embed (or extract) task: small enough to spread over worker processes, large
# enough to batch.
ROOTS_PER_TASK = 16
# Sessions per memory task, for the same reason.
SESSIONS_PER_TASK = 16


class CeleryTrigger:
    """WorkTrigger over Celery."""

    def __init__(self, app: Celery) -> None:
        self.app = app

    def embed(self, roots: Sequence[uuid.UUID]) -> None:
        ids = [str(r) for r in roots]
        for start in range(0, len(ids), ROOTS_PER_TASK):
            self.app.send_task(EMBED_TASK, args=[ids[start:start + ROOTS_PER_TASK]])

    def extract(self, roots: Sequence[uuid.UUID]) -> None:
        ids = [str(r) for r in roots]
        for start in range(0, len(ids), ROOTS_PER_TASK):
            self.app.send_task(EXTRACT_TASK, args=[ids[start:start + ROOTS_PER_TASK]],
                               queue=EXTRACT_QUEUE)

    def relay(self) -> None:
        """The graph relay (the lexical replicas of the read hosts follow the log themselves)."""
        self.app.send_task(RELAY_TASK, queue=RELAY_QUEUE)

    def memory(self, sessions: Sequence[uuid.UUID]) -> None:
        ids = [str(s) for s in sessions]
        for start in range(0, len(ids), SESSIONS_PER_TASK):
            self.app.send_task(MEMORY_TASK, args=[ids[start:start + SESSIONS_PER_TASK]])
