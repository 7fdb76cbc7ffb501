"""The in-memory PPR snapshots of one API process: built per namespace at first use, kept
fresh by tailing the change log, bounded in count and bytes (least recently used out).

- `view(namespace)` answers at once: the namespace's snapshot when it is fresh (its last
  refresh read started at most `max_age` seconds ago), else None, and the caller walks in SQL.
  A namespace without a snapshot gets one built in the background, so no request waits for a
  build.
- Freshness: while snapshots are held, a tail task reads the change log (migration 0029) every
  `max_age / 4` seconds and re-reads the state of the keys it names (never the namespace). A
  write committed at T is in every snapshot answering after T + `max_age`; until a snapshot
  has caught up, the SQL walk answers.
- A log the tail cannot bridge (no read for longer than half the log's retention: the sweep may
  have pruned entries it never saw; or a truncated table) drops the snapshots; they are built
  again at their next use.
- Memory: at most `max_namespaces` snapshots and `max_bytes` (estimated) in all; a namespace
  whose snapshot alone is over the bytes bound is walked in SQL (tried again after the log's
  retention).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pipeline.domain.entity_snapshot import EDGE, ENTITY, OBJECT, ROW, TRUNCATE, LogEntry
from pipeline.ports import EntitySnapshotSource
from pipeline.retrieval.ppr.snapshot import EntitySnapshot

log = logging.getLogger(__name__)

BUILD_RETRY_SECONDS = 30.0  # after a failed build (database down): the SQL walk answers meanwhile


@dataclass(frozen=True)
class SnapshotConfig:
    """Bounds of the snapshots. A snapshot answers only when its last refresh started at most
    `max_age` seconds ago (a write committed at T is walked by every search after T + max_age;
    the SQL walk answers otherwise); at most `max_namespaces` snapshots and `max_bytes`
    (PPR_SNAPSHOT_MAX_BYTES) per process, least recently used out. The sweep prunes the change
    log after `log_retention` seconds; a process that has not read it for half that long
    rebuilds its snapshots."""

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
        self._building: dict[uuid.UUID, asyncio.Task[None]] = {}
        self._not_before: dict[uuid.UUID, float] = {}  # refused (too big) or failed builds
        self._lock = asyncio.Lock()  # one log read and apply at a time (tail, catch-up)
        self._since: int | None = None  # xmin of the tail's last read
        self._seen: dict[int, int] = {}  # seq -> xid of entries applied, xid >= _since
        self._last_read = 0.0
        self._tail: asyncio.Task[None] | None = None
        self._closed = False
        self.builds = 0
        self.last_build_seconds = 0.0

    def view(self, namespace: uuid.UUID) -> EntitySnapshot | None:
        """The namespace's snapshot when it is fresh, else None (a build starts if none)."""
        snap = self._held.get(namespace)
        if snap is not None:
            self._held.move_to_end(namespace)
            return snap if self.clock() - snap.as_of <= self.config.max_age else None
        if (not self._closed and namespace not in self._building
                and self._not_before.get(namespace, 0) <= self.clock()):
            task = asyncio.get_running_loop().create_task(self._build(namespace))
            self._building[namespace] = task
            task.add_done_callback(lambda _: self._building.pop(namespace, None))
        return None

    def peek(self, namespace: uuid.UUID) -> EntitySnapshot | None:
        """`view` without starting a build: the seed lookup uses a fresh snapshot when there
        is one, and a namespace's first search still walks in SQL (its walk starts the
        build), whatever the build's speed."""
        snap = self._held.get(namespace)
        return snap if snap is not None and self.clock() - snap.as_of <= self.config.max_age \
            else None

    def status(self) -> dict[str, float]:
        """What is held, for the metrics and the status page."""
        now = self.clock()
        return {"namespaces": len(self._held), "bytes": sum(s.nbytes() for s in
                                                             self._held.values()),
                "building": len(self._building), "builds": self.builds,
                "last_build_seconds": round(self.last_build_seconds, 3),
                "oldest_age_seconds": round(max((now - s.as_of for s in self._held.values()),
                                             default=0.0), 3)}

    async def close(self) -> None:
        """Stop the tail and the builds. They also stop on the flag: on Python 3.11 a
        cancellation can be lost inside a library's `wait_for` that completes as it lands
        (the task stays "cancelling" and goes on), and the tail then slept and refreshed for
        ever while this waited for it (a test hung 10 minutes in `make test`)."""
        self._closed = True
        tasks = [*self._building.values(), *([self._tail] if self._tail else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._held.clear()

    async def _build(self, namespace: uuid.UUID) -> None:
        started = self.clock()
        try:
            data = await self.source.build(namespace)
            snap = await asyncio.to_thread(EntitySnapshot, namespace, data, started)
            async with self._lock:
                # catch up from the build's own position: entries it did not see
                read_at = self.clock()
                read = await self.source.changes(data.xmin, namespace)
                if any(e.kind == TRUNCATE for e in read.entries):
                    return  # built across a truncation: the next use builds again
                await self._apply(snap, read.entries, read_at)
                if self._since is None:
                    self._since, self._last_read = read.xmin, read_at
                    self._seen = {e.seq: e.xid for e in read.entries if e.xid >= read.xmin}
                self._install(namespace, snap)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the SQL walk answers; try again later
            log.warning("building the PPR snapshot of %s failed: %s", namespace, exc)
            self._not_before[namespace] = self.clock() + BUILD_RETRY_SECONDS
            return
        self.builds += 1
        self.last_build_seconds = self.clock() - started
        log.info("PPR snapshot of %s built in %.2f s (%d entities, %d rows, ~%d MB)",
                 namespace, self.last_build_seconds, len(snap.e_keys), len(snap.r_keys),
                 snap.nbytes() >> 20)

    def _install(self, namespace: uuid.UUID, snap: EntitySnapshot) -> None:
        if snap.nbytes() > self.config.max_bytes:
            log.warning("the PPR snapshot of %s needs ~%d MB, over the bound: walked in SQL",
                        namespace, snap.nbytes() >> 20)
            self._not_before[namespace] = self.clock() + self.config.log_retention
            return
        self._held[namespace] = snap
        self._held.move_to_end(namespace)
        self._evict(keep=namespace)
        if not self._closed and (self._tail is None or self._tail.done()):
            self._tail = asyncio.get_running_loop().create_task(self._follow())

    def _evict(self, keep: uuid.UUID) -> None:
        """Least recently used out, down to the bounds (the newest always stays)."""
        while len(self._held) > 1 and (
                len(self._held) > self.config.max_namespaces
                or sum(s.nbytes() for s in self._held.values()) > self.config.max_bytes):
            oldest = next(iter(self._held))
            if oldest == keep:
                break
            del self._held[oldest]

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
                await self._apply(snap, by_ns.get(namespace, []), read_at)
            self._seen = {seq: xid for seq, xid in
                          [*self._seen.items(), *((e.seq, e.xid) for e in fresh)]
                          if xid >= read.xmin}
            self._since, self._last_read = read.xmin, read_at

    async def _apply(self, snap: EntitySnapshot, entries: Iterable[LogEntry],
                     read_at: float) -> None:
        keys: dict[str, set[uuid.UUID]] = {ROW: set(), OBJECT: set(), ENTITY: set(),
                                           EDGE: set()}
        for entry in entries:
            keys[entry.kind].update(entry.ids)
        if any(keys.values()):
            state = await self.source.read_keys(snap.namespace, sorted(keys[ROW]),
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
