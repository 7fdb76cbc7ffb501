"""The read host's follower: a thread of each API process that keeps the host's lexical replicas
current (`LexicalWriter.run` on every generation that is active or being built), and what
readiness and metrics read of a replica (`replica_lag_async`).

Every API process of a host runs one; the replica's lock lets one of them write at a time and
the others find it held and skip, so a host whose writing process dies is taken over by another
within a poll. A generation being built by a replay is followed too, so that when it becomes
active each host's replica of it is already current instead of building itself then.

Each poll asks Postgres one small question per generation (is a row beyond the cursor?) and runs
the writer only when one is, or to report the replica's cursor (which keeps it live for the
log's pruning) every `HEARTBEAT_SECONDS`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from psycopg_pool import ConnectionPool

from pipeline.generations.active import list_generations
from pipeline.lexical import changes
from pipeline.lexical.replica import read_state
from pipeline.lexical.writer import LexicalWriter
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings

log = logging.getLogger(__name__)

# How often a follower looks for new log rows: a row committed now is searchable on this host
# within about this much plus its apply (what `wait: true` writes and new documents wait for).
POLL_SECONDS = 0.2
# How often a follower reports its cursor when nothing changes: well inside
# changes.REPLICA_TTL_SECONDS, after which a silent replica stops holding the log back.
HEARTBEAT_SECONDS = 30.0
# How often the generations being followed are re-read (a replay starting or switching).
GENERATIONS_SECONDS = 5.0
# A replica's follower that failed waits this long before trying again (Postgres down).
RETRY_SECONDS = 2.0


# Why a replica is not ready, as `/readyz` says it (fixed texts: they name no host).
REPLICA_BUILDING = "building from Postgres"
REPLICA_BEHIND = "behind the log past LEXICAL_REPLICA_MAX_LAG"


@dataclass(frozen=True)
class ReplicaLag:
    """How far a host's replica of one generation is behind the log."""

    built: bool  # False: it has not finished building itself from Postgres
    seconds: float  # how long the oldest row it has not applied has waited (0: none)


async def replica_lag_async(settings: Settings, conn: Any) -> ReplicaLag:
    """How far this data directory's replica of `settings`' generation is behind the log
    (the API's readiness and metrics)."""
    state = read_state(settings)
    if state is None:
        return ReplicaLag(False, 0.0)
    cur = await conn.execute(changes.LAG_SQL, (str(state.cursor.xid), state.cursor.id))
    row = await cur.fetchone()
    return ReplicaLag(True, max(0.0, float(row[0])) if row else 0.0)


class _Followed:
    """One generation's writer and when it last reported."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pool: ConnectionPool[Any] = make_pool(settings, min_size=1, max_size=2,
                                                   name="brainstream-lexical-follower")
        self.writer = LexicalWriter(settings, self.pool)
        self.reported = 0.0

    def step(self, stop: Callable[[], bool]) -> None:
        state = read_state(self.settings)
        due = time.monotonic() - self.reported > HEARTBEAT_SECONDS
        if state is None:
            due = True
        elif not due:
            with self.pool.connection() as conn:
                due = changes.lag_seconds(conn, state.cursor) is not None
        if due:
            stats = self.writer.run(stop=stop)
            if not stats.skipped:
                self.reported = time.monotonic()
            if stats.built:
                log.info("lexical replica of generation %d built: %d documents",
                         self.settings.generation, stats.documents)

    def close(self) -> None:
        self.pool.close()


class ReplicaFollower:
    """The follower thread of one API process (`start`, `stop`)."""

    def __init__(self, base: Settings, *, poll: float = POLL_SECONDS) -> None:
        self.base = base
        self.poll = poll
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._followed: dict[int, _Followed] = {}
        self._generations_at = 0.0
        self._failed_at: dict[int, float] = {}

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="lexical-follower", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after the current step (a writer mid-batch finishes its batch)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        for followed in self._followed.values():
            followed.close()
        self._followed.clear()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._refresh_generations()
            except Exception as exc:  # the base database unreachable: keep what we follow
                log.warning("lexical follower: cannot read the generations: %s", exc)
            for gen_id, followed in list(self._followed.items()):
                if self._stop.is_set():
                    break
                if time.monotonic() - self._failed_at.get(gen_id, -RETRY_SECONDS) \
                        < RETRY_SECONDS:
                    continue
                try:
                    followed.step(self._stop.is_set)
                except Exception as exc:  # Postgres down, a disk error: try again later
                    self._failed_at[gen_id] = time.monotonic()
                    log.warning("lexical follower of generation %d: %s", gen_id, exc)
            self._stop.wait(self.poll)

    def _refresh_generations(self) -> None:
        if time.monotonic() - self._generations_at < GENERATIONS_SECONDS and self._followed:
            return
        self._generations_at = time.monotonic()
        wanted = {g.id: g for g in list_generations(self.base)
                  if g.state in ("active", "building")}
        for gone in set(self._followed) - set(wanted):
            self._followed.pop(gone).close()
        for gen_id, gen in wanted.items():
            if gen_id not in self._followed:
                try:
                    self._followed[gen_id] = _Followed(gen.settings(self.base))
                except Exception as exc:  # a replay's database not created yet
                    log.warning("lexical follower: generation %d: %s", gen_id, exc)
                    self._generations_at = 0.0  # look again at the next poll
