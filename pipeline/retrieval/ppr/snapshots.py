"""The in-memory PPR snapshots of one API process: built per namespace at first use, kept
fresh by tailing the change log, bounded in count and bytes (least recently used out).

- `view(namespace)` answers at once: the namespace's snapshot when it is fresh (its last
  refresh read started at most `max_age` seconds ago), else None, and the caller walks in SQL.
  A namespace without a snapshot is queued for a build, so no request waits for a build.
- Builds: one at a time per process (a slot shared by every generation's snapshots), in the
  order asked; at most `max_namespaces` wait (a namespace asked while the queue is full is
  asked again by its next search). A build runs on a connection of its own, never the read
  pool's (`EntitySnapshotSource.build_session`).
- Freshness: while snapshots are held, a tail task reads the change log (migration 0029) every
  `max_age / 4` seconds and re-reads the state of the keys it names (never the namespace). A
  write committed at T is in every snapshot answering after T + `max_age`; until a snapshot
  has caught up, the SQL walk answers.
- A log the tail cannot bridge (no read for longer than half the log's retention: the sweep may
  have pruned entries it never saw; or a truncated table) drops the snapshots; they are built
  again at their next use.
- Memory: `max_bytes` (estimated, `SnapshotSize.nbytes`) for every snapshot held together and
  the one being built, and at most `max_namespaces` snapshots, least recently used out. A build
  counts its namespace first: over `max_bytes` alone it is refused before reading a row; else
  the least recently used snapshots make room for it first, and its read is cancelled as soon
  as it crosses the room it was given. After every refresh a snapshot that grew past
  `max_bytes` alone is dropped. A namespace over the bound is walked in SQL and counted again
  after `OVER_LIMIT_RETRY` per multiple of the bound it needed (at most `OVER_LIMIT_RETRY_CAP`).
- A failed build (database down, statement timeout) is tried again after a jittered backoff
  that doubles with each failure of that namespace, from `BUILD_RETRY_BASE` up to
  `BUILD_RETRY_CAP`; a build that succeeds resets it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pipeline.domain.entity_snapshot import (
    EDGE,
    ENTITY,
    OBJECT,
    ROW,
    TRUNCATE,
    LogEntry,
    SnapshotSize,
    SnapshotTooLarge,
)
from pipeline.domain.retry import backoff_seconds
from pipeline.fairness.tenant import detached
from pipeline.ports import EntitySnapshotSource, SnapshotReads
from pipeline.retrieval.ppr.snapshot import EntitySnapshot

log = logging.getLogger(__name__)

# After a failed build (database down, statement timeout) the SQL walk answers; the namespace
# is tried again after 30 s, 60 s, 120 s ... (each x0.5-1 at random, so processes that failed
# together do not retry together), at most 30 minutes: a build that keeps failing costs the
# database a namespace's read at most twice an hour per process.
BUILD_RETRY_BASE = 30.0
BUILD_RETRY_CAP = 1800.0
# A namespace over the bytes bound is counted again (no row read) after an hour per multiple of
# the bound it needed, at most a day: one just over may fit after a few deletes or a restart
# with a larger bound (which forgets this), one ten times over needs most of it deleted first.
OVER_LIMIT_RETRY = 3600.0
OVER_LIMIT_RETRY_CAP = 86400.0

# One build at a time per process: the slot of the running event loop, shared by the
# snapshots of every generation the process serves (a replay's switch holds two).
_BUILD_SLOTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = \
    weakref.WeakKeyDictionary()


def build_slot() -> asyncio.Lock:
    """The running event loop's build slot."""
    loop = asyncio.get_running_loop()
    slot = _BUILD_SLOTS.get(loop)
    if slot is None:
        slot = _BUILD_SLOTS[loop] = asyncio.Lock()
    return slot


@dataclass(frozen=True)
class SnapshotConfig:
    """Bounds of the snapshots. A snapshot answers only when its last refresh started at most
    `max_age` seconds ago (a write committed at T is walked by every search after T + max_age;
    the SQL walk answers otherwise); at most `max_namespaces` snapshots, and `max_bytes`
    (PPR_SNAPSHOT_MAX_BYTES) for all of them and the one being built together, per process,
    least recently used out. The sweep prunes the change log after `log_retention` seconds; a
    process that has not read it for half that long rebuilds its snapshots."""

    max_age: float = 5.0
    max_namespaces: int = 64
    max_bytes: int = 1 << 30
    log_retention: float = 3600.0


class PprSnapshots:
    """The process's snapshots over one database (one index generation)."""

    def __init__(self, source: EntitySnapshotSource, config: SnapshotConfig | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self.config = config or SnapshotConfig()
        self.clock = clock
        self._held: OrderedDict[uuid.UUID, EntitySnapshot] = OrderedDict()
        self._queue: OrderedDict[uuid.UUID, None] = OrderedDict()  # waiting for the slot
        self._builder: asyncio.Task[None] | None = None
        self._building: uuid.UUID | None = None
        self._not_before: dict[uuid.UUID, float] = {}  # refused (too big) or failed builds
        self._failures: dict[uuid.UUID, int] = {}  # failed builds in a row, per namespace
        self._too_large: dict[uuid.UUID, int] = {}  # bytes a refused namespace needed
        self._lock = asyncio.Lock()  # one log read and apply at a time (tail, catch-up)
        self._since: int | None = None  # xmin of the tail's last read
        self._seen: dict[int, int] = {}  # seq -> xid of entries applied, xid >= _since
        self._last_read = 0.0
        self._tail: asyncio.Task[None] | None = None
        self._closed = False
        self.builds = 0
        self.last_build_seconds = 0.0

    def view(self, namespace: uuid.UUID) -> EntitySnapshot | None:
        """The namespace's snapshot when it is fresh, else None (a build is queued if none)."""
        snap = self._held.get(namespace)
        if snap is not None:
            self._held.move_to_end(namespace)
            return snap if self.clock() - snap.as_of <= self.config.max_age else None
        self._ask(namespace)
        return None

    def next_attempt(self, namespace: uuid.UUID) -> float | None:
        """When a namespace whose build failed or was refused may be built again (on the
        clock), None when nothing holds it back."""
        return self._not_before.get(namespace)

    def _ask(self, namespace: uuid.UUID) -> None:
        if (self._closed or namespace in self._queue or namespace == self._building
                or self._not_before.get(namespace, 0) > self.clock()
                or len(self._queue) >= self.config.max_namespaces):
            return
        self._queue[namespace] = None
        if self._builder is None or self._builder.done():
            self._builder = detached(self._drain())

    def peek(self, namespace: uuid.UUID) -> EntitySnapshot | None:
        """`view` without starting a build: the seed lookup uses a fresh snapshot when there
        is one, and a namespace's first search still walks in SQL (its walk starts the
        build), whatever the build's speed."""
        snap = self._held.get(namespace)
        return snap if snap is not None and self.clock() - snap.as_of <= self.config.max_age \
            else None

    def status(self) -> dict[str, float]:
        """What is held, built and refused, for the metrics and the status page."""
        now = self.clock()
        return {"namespaces": len(self._held), "bytes": self._held_bytes(),
                "building": int(self._building is not None), "queued": len(self._queue),
                "refused": sum(1 for ns in self._too_large
                               if self._not_before.get(ns, 0) > now),
                "builds": self.builds, "last_build_seconds": round(self.last_build_seconds, 3),
                "oldest_age_seconds": round(max((now - s.as_of for s in self._held.values()),
                                             default=0.0), 3)}

    async def close(self) -> None:
        """Stop the tail and the builds. They also stop on the flag: on Python 3.11 a
        cancellation can be lost inside a library's `wait_for` that completes as it lands
        (the task stays "cancelling" and goes on), and the tail then slept and refreshed for
        ever while this waited for it (a test hung 10 minutes in `make test`)."""
        self._closed = True
        self._queue.clear()
        tasks = [t for t in (self._builder, self._tail) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._held.clear()

    async def _drain(self) -> None:
        """Build the queued namespaces, one at a time in the process."""
        while self._queue and not self._closed:
            namespace, _ = self._queue.popitem(last=False)
            async with build_slot():
                if self._closed:
                    break
                self._building = namespace
                try:
                    await self._build(namespace)
                finally:
                    self._building = None

    async def _build(self, namespace: uuid.UUID) -> None:
        started = self.clock()
        try:
            async with self.source.build_session() as session:
                data = await session.build(namespace, self._room)
                snap = await asyncio.to_thread(EntitySnapshot, namespace, data, started)
                async with self._lock:
                    # catch up from the build's own position: entries it did not see
                    read_at = self.clock()
                    read = await session.changes(data.xmin, namespace)
                    if any(e.kind == TRUNCATE for e in read.entries):
                        return  # built across a truncation: the next use builds again
                    await self._apply(snap, read.entries, read_at, session)
                    if snap.nbytes() > self.config.max_bytes:  # grew while it was built
                        self._over_limit(namespace, snap.nbytes(),
                                         f"~{snap.nbytes() >> 10} KiB once caught up")
                        return
                    if self._since is None:
                        self._since, self._last_read = read.xmin, read_at
                        self._seen = {e.seq: e.xid for e in read.entries
                                      if e.xid >= read.xmin}
                    self._install(namespace, snap)
        except asyncio.CancelledError:
            raise
        except SnapshotTooLarge as exc:
            self._over_limit(namespace, exc.needed, str(exc))
            return
        except Exception as exc:  # the SQL walk answers; try again later
            self._failed(namespace, exc)
            return
        self._failures.pop(namespace, None)
        self._not_before.pop(namespace, None)
        self._too_large.pop(namespace, None)
        self.builds += 1
        self.last_build_seconds = self.clock() - started
        log.info("PPR snapshot of %s built in %.2f s (%d entities, %d rows, ~%d MB)",
                 namespace, self.last_build_seconds, len(snap.e_keys), len(snap.r_keys),
                 snap.nbytes() >> 20)

    def _room(self, size: SnapshotSize) -> int:
        """The bytes a build of `size` may take: the least recently used snapshots make room
        for it first (none when it is over the bound alone: it is refused)."""
        need, held = size.nbytes(), self._held_bytes()
        if need <= self.config.max_bytes:
            while self._held and held + need > self.config.max_bytes:
                held -= self._held.popitem(last=False)[1].nbytes()
        return self.config.max_bytes - held

    def _over_limit(self, namespace: uuid.UUID, needed: int, why: str) -> None:
        wait = min(OVER_LIMIT_RETRY_CAP,
                   OVER_LIMIT_RETRY * max(1.0, needed / self.config.max_bytes))
        self._not_before[namespace] = self.clock() + wait
        self._too_large[namespace] = needed
        self._failures.pop(namespace, None)  # it was read (or counted): not a failure
        log.warning("the PPR snapshot of %s is over PPR_SNAPSHOT_MAX_BYTES (%s): walked in SQL,"
                    " counted again in %.0f s", namespace, why, wait)

    def _failed(self, namespace: uuid.UUID, exc: Exception) -> None:
        failures = self._failures[namespace] = self._failures.get(namespace, 0) + 1
        self._too_large.pop(namespace, None)
        wait = backoff_seconds(failures, cap=BUILD_RETRY_CAP, base=BUILD_RETRY_BASE) \
            * random.uniform(0.5, 1.0)
        self._not_before[namespace] = self.clock() + wait
        log.warning("building the PPR snapshot of %s failed (%d in a row, next try in %.0f s):"
                    " %s", namespace, failures, wait, exc)

    def _held_bytes(self) -> int:
        return sum(s.nbytes() for s in self._held.values())

    def _install(self, namespace: uuid.UUID, snap: EntitySnapshot) -> None:
        self._held[namespace] = snap
        self._held.move_to_end(namespace)
        self._evict(keep=namespace)
        if not self._closed and (self._tail is None or self._tail.done()):
            self._tail = detached(self._follow())

    def _evict(self, keep: uuid.UUID | None = None) -> None:
        """Least recently used out, down to the bounds (`keep` stays: it fits alone)."""
        sizes = {ns: s.nbytes() for ns, s in self._held.items()}
        while self._held and (len(self._held) > self.config.max_namespaces
                              or sum(sizes.values()) > self.config.max_bytes):
            oldest = next(iter(self._held))
            if oldest == keep:
                break
            del self._held[oldest]
            del sizes[oldest]

    def _recheck(self, namespace: uuid.UUID, snap: EntitySnapshot) -> None:
        """After an apply: a snapshot grown past the bound alone is dropped (walked in SQL
        like a namespace refused at its build)."""
        nbytes = snap.nbytes()
        if nbytes > self.config.max_bytes and self._held.get(namespace) is snap:
            del self._held[namespace]
            self._over_limit(namespace, nbytes, f"grew to ~{nbytes >> 10} KiB")

    async def _follow(self) -> None:
        period = max(0.05, self.config.max_age / 4)
        while self._held and not self._closed:
            await asyncio.sleep(period)
            if self._closed:
                break
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # stale snapshots stop answering; the next tick retries
                log.warning("refreshing the PPR snapshots failed: %s", exc)
        self._since = None

    async def refresh(self) -> None:
        """One tail step: read the log since the last read and apply it to the snapshots."""
        async with self._lock:
            if self._since is None:
                return
            if self.clock() - self._last_read > self.config.log_retention / 2:
                self._drop_all("the change log may have been pruned past the last read")
                return
            read_at = self.clock()
            read = await self.source.changes(self._since)
            fresh = [e for e in read.entries if e.seq not in self._seen]
            if any(e.kind == TRUNCATE for e in fresh):
                self._drop_all("a table of the entity layer was truncated")
                return
            by_ns: dict[uuid.UUID, list[LogEntry]] = {}
            for entry in fresh:
                by_ns.setdefault(entry.namespace_id, []).append(entry)
            for namespace, snap in list(self._held.items()):
                await self._apply(snap, by_ns.get(namespace, []), read_at, self.source)
                self._recheck(namespace, snap)
            self._evict()  # those that grew, least recently used out
            self._seen = {seq: xid for seq, xid in
                          [*self._seen.items(), *((e.seq, e.xid) for e in fresh)]
                          if xid >= read.xmin}
            self._since, self._last_read = read.xmin, read_at

    @staticmethod
    async def _apply(snap: EntitySnapshot, entries: Iterable[LogEntry], read_at: float,
                     reads: SnapshotReads) -> None:
        keys: dict[str, set[uuid.UUID]] = {ROW: set(), OBJECT: set(), ENTITY: set(),
                                           EDGE: set()}
        for entry in entries:
            keys[entry.kind].update(entry.ids)
        if any(keys.values()):
            state = await reads.read_keys(snap.namespace, sorted(keys[ROW]),
                                          sorted(keys[OBJECT]), sorted(keys[ENTITY]),
                                          sorted(keys[EDGE]))
            snap.apply(state, read_at)
        else:
            snap.as_of = max(snap.as_of, read_at)

    def _drop_all(self, why: str) -> None:
        log.info("PPR snapshots dropped (%s); they are built again at their next use", why)
        self._held.clear()
        self._since = None
        self._seen.clear()
