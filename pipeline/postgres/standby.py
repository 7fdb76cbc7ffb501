"""How far behind the primary the read standby is, as one API process sees it.

The lag is the age of the oldest write the standby has not replayed: a probe reads the
primary's WAL position (`pg_current_wal_lsn()`) and then the standby's replayed position
(`pg_last_wal_replay_lsn()`) every `LAG_PROBE_SECONDS`, and keeps the primary's positions of
the last while (`WalHistory`). A standby that has replayed what the primary had at time t holds
every write made before t, so `now - t` bounds how stale its answers are. Unlike the standby's
own `now() - pg_last_xact_replay_timestamp()`, this stays 0 while the primary is idle and
keeps growing while replay is paused or the standby's WAL receiver is cut off.

The probe runs on a connection of its own on each server (not the read pools): the standby's
pool then runs only the requests' reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import psycopg

from pipeline.postgres.lsn import parse_lsn

log = logging.getLogger(__name__)

# How often each API process measures the standby's lag (two one-row queries, one per server).
LAG_PROBE_SECONDS = 0.5
# A read that must see a position past the cached replayed one asks the standby again, at most
# this often: most reads of a namespace just written are decided without a round trip.
REPLAY_CACHE_SECONDS = 0.1
# A probe's statements (and its connection attempts) give up after this long: the standby then
# counts as down.
PROBE_TIMEOUT_SECONDS = 2.0

_REPLAYED = "SELECT pg_last_wal_replay_lsn()::text, pg_is_in_recovery()"
_WRITTEN = "SELECT pg_current_wal_lsn()::text"


class WalHistory:
    """The primary's WAL positions sampled over the last `keep_seconds` (positions never go
    back), and the lag of a standby that has replayed up to a given one."""

    def __init__(self, keep_seconds: float) -> None:
        self.keep_seconds = keep_seconds
        self._samples: deque[tuple[float, int]] = deque()

    def add(self, at: float, position: int) -> None:
        """The primary was at `position` at time `at` (monotonic seconds)."""
        self._samples.append((at, position))
        while len(self._samples) > 2 and self._samples[1][0] < at - self.keep_seconds:
            self._samples.popleft()

    def lag(self, replayed: int, now: float) -> float:
        """Seconds since the primary last had nothing the standby lacks (0 when the standby
        has replayed the newest sample); a standby behind every sample kept is at least as old
        as the oldest one."""
        newest_held: float | None = None
        for at, position in reversed(self._samples):
            if position <= replayed:
                newest_held = at
                break
        if newest_held is None:
            return now - self._samples[0][0] if self._samples else 0.0
        if newest_held == self._samples[-1][0]:
            return 0.0
        return max(0.0, now - newest_held)


@dataclass(frozen=True)
class StandbyState:
    """The standby as last probed: whether it answered (as a standby), its lag and replayed
    position, and when it was probed (monotonic seconds)."""

    up: bool
    lag_seconds: float | None
    replayed: int | None
    probed_at: float

    def serves(self, max_lag: float) -> bool:
        """Whether reads may go to it: it answers and is within the staleness bound."""
        return self.up and self.lag_seconds is not None and self.lag_seconds <= max_lag

    def describe(self, max_lag: float) -> str:
        """"ok", "lagging" (past the bound) or "down"."""
        if not self.up:
            return "down"
        return "ok" if self.serves(max_lag) else "lagging"


DOWN = StandbyState(up=False, lag_seconds=None, replayed=None, probed_at=0.0)


class _ProbeConnection:
    """One autocommit connection to a server, opened again after it fails."""

    def __init__(self, dsn: str, name: str) -> None:
        self.dsn = dsn
        self.name = name
        self._conn: psycopg.AsyncConnection[Any] | None = None

    async def one(self, query: str) -> tuple[Any, ...]:
        """The first row of `query`; any failure closes the connection and raises."""
        try:
            if self._conn is None or self._conn.closed:
                self._conn = await psycopg.AsyncConnection.connect(
                    self.dsn, autocommit=True, connect_timeout=max(1, round(PROBE_TIMEOUT_SECONDS)),
                    application_name=self.name,
                    options=f"-c statement_timeout={round(PROBE_TIMEOUT_SECONDS * 1000)}")
            row = await (await self._conn.execute(query)).fetchone()
        except BaseException:
            await self.close()
            raise
        assert row is not None
        return tuple(row)

    async def close(self) -> None:
        """Close the connection (if open)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()


class StandbyMonitor:
    """The read standby's state for this process: probed in the background
    (`run`, every LAG_PROBE_SECONDS), and asked again on demand whether it has replayed a
    given position (`has_replayed`, at most every REPLAY_CACHE_SECONDS)."""

    def __init__(self, primary_dsn: str, standby_dsn: str, *, max_lag: float,
                 name: str = "brainstream-standby-probe") -> None:
        self.max_lag = max_lag
        self._primary = _ProbeConnection(primary_dsn, name)
        self._standby = _ProbeConnection(standby_dsn, name)
        # keep what a lag past the bound needs to be told apart from one within it
        self._history = WalHistory(keep_seconds=max_lag * 2 + LAG_PROBE_SECONDS * 4)
        self.state = DOWN
        self._replay_checked_at = 0.0
        # when the question behind `state.replayed` was asked: a probe's answer that was asked
        # earlier but arrives later must not take a newer (higher) answer back
        self._replayed_asked_at = 0.0
        self._asking: asyncio.Lock | None = None
        self._warned = False

    async def probe(self) -> StandbyState:
        """Measure now: the primary's position first, then the standby's replayed one."""
        try:
            written = parse_lsn((await self._primary.one(_WRITTEN))[0])
        except Exception as exc:  # the primary's own outage is the read pool's to report
            log.debug("standby probe: the primary did not answer: %s", exc)
            return self.state
        self._history.add(time.monotonic(), written)
        asked_at = time.monotonic()
        try:
            replayed_text, in_recovery = await self._standby.one(_REPLAYED)
        except Exception as exc:
            return self._down(f"{type(exc).__name__}: {exc}")
        if not in_recovery or replayed_text is None:
            # promoted, or a server that is no standby: its reads are not the primary's
            return self._down("the read DSN's server is not a standby in recovery")
        replayed = parse_lsn(replayed_text)
        now = time.monotonic()
        lag = self._history.lag(replayed, now)
        if self.state.up and self.state.replayed is not None \
                and self._replayed_asked_at > asked_at:
            # a question asked after ours already answered: replay only moves forward
            replayed = max(replayed, self.state.replayed)
        else:
            self._replayed_asked_at = asked_at
        self.state = StandbyState(up=True, lag_seconds=lag, replayed=replayed, probed_at=now)
        self._replay_checked_at = max(self._replay_checked_at, asked_at)
        if self._warned:
            self._warned = False
            log.warning("the read standby answers again (lag %.2f s)", self.state.lag_seconds)
        return self.state

    def _down(self, why: str) -> StandbyState:
        if not self._warned:
            self._warned = True
            log.warning("the read standby is down, reads go to the primary: %s", why)
        self.state = StandbyState(up=False, lag_seconds=None, replayed=None,
                                  probed_at=time.monotonic())
        return self.state

    def failed(self, exc: BaseException) -> None:
        """A read could not get a standby connection: down until the next probe says not."""
        self._down(f"{type(exc).__name__}: {exc}")

    async def has_replayed(self, position: int) -> bool:
        """Whether the standby has replayed `position`: from the last answer when it has, else
        asked again unless it was asked in the last REPLAY_CACHE_SECONDS."""
        state = self.state
        if state.replayed is not None and state.replayed >= position:
            return True
        if not state.up or time.monotonic() - self._replay_checked_at < REPLAY_CACHE_SECONDS:
            return False
        if self._asking is None:
            self._asking = asyncio.Lock()
        async with self._asking:  # one question at a time; the others take its answer
            if time.monotonic() - self._replay_checked_at >= REPLAY_CACHE_SECONDS:
                asked_at = self._replay_checked_at = time.monotonic()
                try:
                    replayed_text, _ = await self._standby.one(_REPLAYED)
                except Exception as exc:
                    self._down(f"{type(exc).__name__}: {exc}")
                    return False
                if replayed_text is not None and self.state.up:
                    self._replayed_asked_at = max(self._replayed_asked_at, asked_at)
                    self.state = StandbyState(
                        up=True, lag_seconds=self.state.lag_seconds,
                        replayed=max(parse_lsn(replayed_text), self.state.replayed or 0),
                        probed_at=self.state.probed_at)
        replayed = self.state.replayed
        return replayed is not None and replayed >= position

    async def run(self) -> None:
        """Probe every LAG_PROBE_SECONDS until cancelled."""
        while True:
            await self.probe()
            await asyncio.sleep(LAG_PROBE_SECONDS)

    async def close(self) -> None:
        """Close the probe connections."""
        await self._primary.close()
        await self._standby.close()
