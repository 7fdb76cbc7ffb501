"""`PprSnapshots` (pipeline/retrieval/ppr/snapshots.py) over an in-memory source: a view only
when fresh, builds in the background, least recently used out past the bounds, a log gap or a
truncation drops the snapshots, a failed build is retried later, and a change is applied by key
(with `EntitySnapshot.apply` idempotent)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Sequence

import numpy as np

from pipeline.domain.entity_snapshot import (
    EntityState,
    KeyState,
    LogEntry,
    LogRead,
    SnapshotBuild,
    SnapshotRow,
    SnapshotSize,
    SnapshotTooLarge,
)
from pipeline.retrieval.ppr.snapshots import PprSnapshots, SnapshotConfig

E = sorted(uuid.uuid4() for _ in range(3))
R = sorted(uuid.uuid4() for _ in range(3))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeSource:
    """Each namespace: entities E, rows R (R[2] a part of R[0]), R[i] naming E[i]."""

    def __init__(self) -> None:
        self.entries: list[LogEntry] = []
        self.xid = 10
        self.builds: list[uuid.UUID] = []
        self.fail = False
        self.state = KeyState()

    @contextlib.asynccontextmanager
    async def build_session(self) -> AsyncIterator[FakeSource]:
        yield self  # one source plays the build's own connection too

    async def build(self, namespace: uuid.UUID, room: Callable[[SnapshotSize], int]
                    ) -> SnapshotBuild:
        self.builds.append(namespace)
        if self.fail:
            raise OSError("database down")
        size = SnapshotSize(entities=3, rows=3, pairs=3)
        if size.nbytes() > room(size):
            raise SnapshotTooLarge(size.nbytes(), room(size), 0)
        rows = [SnapshotRow(R[0], R[0], False, True), SnapshotRow(R[1], R[1], False, True),
                SnapshotRow(R[2], R[0], True, True)]
        return SnapshotBuild(self.xid, list(E), np.array([1, 1, 1]), np.array([True] * 3),
                             rows, np.array([0, 1, 2]), np.array([0, 1, 2]), [])

    async def changes(self, since: int, namespace: uuid.UUID | None = None) -> LogRead:
        return LogRead([e for e in self.entries if e.xid >= since
                        and (namespace in (None, e.namespace_id) or e.kind == "truncate")],
                       self.xid)

    async def read_keys(self, namespace: uuid.UUID, rows: Sequence[uuid.UUID],
                        objects: Sequence[uuid.UUID], entities: Sequence[uuid.UUID],
                        edge_entities: Sequence[uuid.UUID]) -> KeyState:
        return self.state


async def _built(snaps: PprSnapshots, ns: uuid.UUID) -> None:
    assert snaps.view(ns) is None  # never waits: the build runs in the background
    for _ in range(200):
        await asyncio.sleep(0)
        if ns in snaps._held:
            return
        await asyncio.sleep(0.001)
    raise AssertionError("not built")


def test_a_view_only_when_fresh_and_lru_out_past_the_bounds() -> None:
    async def run() -> None:
        clock, source = Clock(), FakeSource()
        snaps = PprSnapshots(source, SnapshotConfig(max_age=5, max_namespaces=2), clock)
        a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        for ns in (a, b):
            await _built(snaps, ns)
        assert snaps.view(a) is not None
        clock.now += 6  # no refresh read for longer than max_age: the SQL walk answers
        assert snaps.view(a) is None
        clock.now -= 6
        assert snaps.view(a) is not None  # a used last: b is the least recently used
        await _built(snaps, c)
        assert set(snaps._held) == {a, c}
        assert snaps.status()["namespaces"] == 2
        await snaps.close()

    asyncio.run(run())


def test_a_snapshot_over_the_bytes_bound_is_not_held() -> None:
    async def run() -> None:
        clock, source = Clock(), FakeSource()
        snaps = PprSnapshots(source, SnapshotConfig(max_bytes=100), clock)
        ns = uuid.uuid4()
        assert snaps.view(ns) is None
        for _ in range(50):
            await asyncio.sleep(0.001)
        assert snaps.view(ns) is None and not snaps._held
        assert source.builds == [ns]  # not built again at once
        await snaps.close()

    asyncio.run(run())


def test_a_failed_build_is_retried_later() -> None:
    async def run() -> None:
        clock, source = Clock(), FakeSource()
        source.fail = True
        snaps = PprSnapshots(source, SnapshotConfig(), clock)
        ns = uuid.uuid4()
        snaps.view(ns)
        for _ in range(20):
            await asyncio.sleep(0.001)
        snaps.view(ns)
        assert source.builds == [ns]
        source.fail = False
        next_try = snaps.next_attempt(ns)
        assert next_try is not None and clock.now + 15 <= next_try <= clock.now + 30
        clock.now = next_try
        await _built(snaps, ns)
        await snaps.close()

    asyncio.run(run())


def test_changes_apply_by_key_and_a_gap_or_truncation_drops_all() -> None:
    async def run() -> None:
        clock, source = Clock(), FakeSource()
        snaps = PprSnapshots(source, SnapshotConfig(log_retention=100), clock)
        ns = uuid.uuid4()
        await _built(snaps, ns)
        view = snaps.view(ns)
        assert view is not None and view.live_row(R[1])
        # R[1] deleted and E[0] merged away, in one logged transaction
        source.entries.append(LogEntry(1, 11, ns, "object", (R[1],)))
        source.xid = 12
        source.state = KeyState(asked_rows={R[1]}, rows=[SnapshotRow(R[1], R[1], False, False)],
                                entities=[EntityState(E[0], 1, False)])
        clock.now += 1
        await snaps.refresh()
        await snaps.refresh()  # the same entry is not applied twice; applying is idempotent
        assert not view.live_row(R[1]) and view.as_of == clock.now
        hop = await view.hop(ns, E, R, 10, 10)
        assert [m.entity_id for m in hop.rows_of] == [E[2]]  # E[0] merged, R[1] dead
        assert view.counts()["entities"] == 3
        # another namespace's entry is not this snapshot's business
        source.entries.append(LogEntry(2, 12, uuid.uuid4(), "row", (R[0],)))
        source.state = KeyState(asked_rows={R[0]}, mentions={R[0]: ()})
        await snaps.refresh()
        assert (await view.hop(ns, [E[2]], [], 10, 10)).rows_of
        clock.now += 51  # no read for more than half the retention: the log may have a gap
        await snaps.refresh()
        assert not snaps._held
        await _built(snaps, ns)
        source.entries.append(LogEntry(3, 12, uuid.UUID(int=0), "truncate", ()))
        await snaps.refresh()
        assert not snaps._held
        await snaps.close()

    asyncio.run(run())


class SwallowingSource(FakeSource):
    """A log read that loses the cancellation landing in it, as `asyncio.wait_for` of Python
    3.11 does when the awaited read completes at the same moment."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.reading = asyncio.Event()

    async def changes(self, since: int, namespace: uuid.UUID | None = None) -> LogRead:
        self.reads += 1
        if namespace is None:  # the tail's read
            self.reading.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.05)
        return await super().changes(since, namespace)


def test_close_returns_when_the_tail_lost_its_cancellation() -> None:
    async def run() -> None:
        source = SwallowingSource()
        snaps = PprSnapshots(source, SnapshotConfig(max_age=0.2))  # the tail reads every 50 ms
        ns = uuid.uuid4()
        await _built(snaps, ns)
        await asyncio.wait_for(source.reading.wait(), 5)
        await asyncio.wait_for(snaps.close(), 5)  # hung for ever before the flag
        reads = source.reads
        await asyncio.sleep(0.2)
        assert source.reads == reads  # the tail stopped
        assert snaps.view(ns) is None and not snaps._queue  # no build after close

    asyncio.run(run())


def test_a_build_gets_room_from_the_least_recently_used_before_it_reads() -> None:
    async def run() -> None:
        clock, source = Clock(), FakeSource()
        probe = PprSnapshots(source, SnapshotConfig(), clock)
        await _built(probe, uuid.uuid4())
        held = next(iter(probe._held.values())).nbytes()
        counted = SnapshotSize(entities=3, rows=3, pairs=3).nbytes()  # what FakeSource counts
        await probe.close()
        # two held leave less than the third build's count: it gets the least recently used's
        snaps = PprSnapshots(source, SnapshotConfig(max_bytes=2 * held + counted - 1), clock)
        a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
        for ns in (a, b, c):
            await _built(snaps, ns)
        assert list(snaps._held) == [b, c] and snaps.status()["refused"] == 0
        await snaps.close()

    asyncio.run(run())
