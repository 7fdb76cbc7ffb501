"""What bounds the PPR snapshots' cost to an API process, on the real database: builds run one
at a time, each on a connection of its own (never the read pool's); a namespace over the bytes
bound is refused from its count before a row is read, and a read that crosses the cap it was
given is cancelled mid-stream; a snapshot that a refresh grows past the bound is dropped; a
namespace whose builds keep failing is tried again later and later, up to a cap.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool

from pipeline.domain.entity_snapshot import (
    KeyState,
    LogRead,
    SnapshotBuild,
    SnapshotSize,
    SnapshotTooLarge,
)
from pipeline.postgres.pool import AsyncConn
from pipeline.retrieval.ppr.snapshots import BUILD_RETRY_BASE, BUILD_RETRY_CAP, OVER_LIMIT_RETRY
from pipeline.retrieval.store import ppr_snapshot
from pipeline.retrieval.store.ppr_snapshot import (
    BUILD_APPLICATION,
    PgEntitySnapshotSource,
    PgSnapshotBuild,
)
from pipeline.settings import Settings
from tests.entities.holdutil import extract_now
from tests.pipelineutil import ingest, put
from tests.ppr_snapshot.snaputil import fresh_view, snapshots_on
from tests.ppr_walk.test_ppr_hop_sql import DOCS, _content


def _tenant(settings: Settings) -> uuid.UUID:
    """A namespace with the documents of the walk tests, extracted by the real stage."""
    ns = uuid.uuid4()
    ids = {doc: str(uuid.uuid4()) for doc in DOCS}
    ingest(settings, [put(ns, id=ids[doc], kind="note", title=title, content=_content(parts))
                      for doc, (title, parts) in DOCS.items()])
    extract_now(settings, ids.values())
    return ns


@pytest.fixture(scope="module")
def tenants(catalog: Settings) -> tuple[uuid.UUID, uuid.UUID]:
    """Two tenants, the same documents each."""
    return _tenant(catalog), _tenant(catalog)


class _Gated:
    """A build session that waits at `gate` (its connection open, nothing read yet)."""

    def __init__(self, session: PgSnapshotBuild, source: GatedSource) -> None:
        self.session, self.source = session, source

    async def build(self, namespace: uuid.UUID, room: Callable[[SnapshotSize], int]
                    ) -> SnapshotBuild:
        self.source.started.append(namespace)
        self.source.entered.set()
        await self.source.gate.wait()
        return await self.session.build(namespace, room)

    async def changes(self, since: int, namespace: uuid.UUID | None = None) -> LogRead:
        return await self.session.changes(since, namespace)

    async def read_keys(self, namespace: uuid.UUID, *keys: Any) -> KeyState:
        return await self.session.read_keys(namespace, *keys)


class GatedSource(PgEntitySnapshotSource):
    """Counts the build sessions open at once (the most ever), and holds each build at a gate."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn]) -> None:
        super().__init__(pool)
        self.gate, self.entered = asyncio.Event(), asyncio.Event()
        self.started: list[uuid.UUID] = []
        self.open = self.most_open = 0

    @asynccontextmanager
    async def build_session(self) -> AsyncIterator[_Gated]:  # type: ignore[override]
        async with super().build_session() as session:
            self.open += 1
            self.most_open = max(self.most_open, self.open)
            try:
                yield _Gated(session, self)
            finally:
                self.open -= 1


async def _builders(conn: AsyncConn) -> int:
    cur = await conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                             (BUILD_APPLICATION,))
    found = await cur.fetchone()
    assert found is not None
    return int(found[0])


def test_builds_run_one_at_a_time_and_never_on_the_read_pool(
        catalog: Settings, tenants: tuple[uuid.UUID, uuid.UUID]) -> None:
    a, b = tenants

    async def run() -> None:
        # max_age: the tail cannot refresh while the test holds the pool; nothing goes stale
        async with snapshots_on(catalog, max_age=600.0, pool_size=2,
                                source=GatedSource) as (pool, snaps):
            source = snaps.source
            assert isinstance(source, GatedSource)
            held = [await pool.getconn() for _ in range(2)]  # every read connection
            try:
                assert snaps.view(a) is None and snaps.view(b) is None  # nobody waits
                await asyncio.wait_for(source.entered.wait(), 60)
                # a's build holds its own connection at the gate; b's waits for the slot
                assert source.started == [a]
                assert snaps.status()["building"] == 1 and snaps.status()["queued"] == 1
                assert await _builders(held[0]) == 1
                source.gate.set()
                await fresh_view(snaps, a)
                await fresh_view(snaps, b)
                assert source.started == [a, b] and source.most_open == 1
                assert snaps.builds == 2
                assert await _builders(held[0]) == 0  # each build's connection closed
            finally:
                for conn in held:
                    await pool.putconn(conn)

    asyncio.run(run())


@pytest.fixture()
def copies(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The tuples each COPY stream of a build delivered (one entry per COPY run)."""
    seen: list[int] = []
    real = ppr_snapshot.stream_copy

    async def counted(*args: Any, **kwargs: Any) -> int:
        seen.append(-1)
        n = await real(*args, **kwargs)
        seen[-1] = n
        return n

    monkeypatch.setattr(ppr_snapshot, "stream_copy", counted)
    yield seen


def test_an_over_limit_namespace_is_refused_before_a_row_is_read(
        catalog: Settings, tenants: tuple[uuid.UUID, uuid.UUID], copies: list[int]) -> None:
    ns = tenants[0]

    async def run() -> None:
        async with snapshots_on(catalog) as (_pool, snaps):
            assert isinstance(snaps.source, PgEntitySnapshotSource)
            async with snaps.source.build_session() as session:
                size = await session.count(ns)
                assert size.entities > 8 and size.rows > 6 and size.pairs > 8
                with pytest.raises(SnapshotTooLarge) as refused:
                    await session.build(ns, lambda s: s.nbytes() - 1)
                assert refused.value.read == 0 and refused.value.needed == size.nbytes()
                assert copies == []  # no COPY ran
        async with snapshots_on(catalog, max_bytes=size.nbytes() - 1) as (_pool, snaps):
            snaps.view(ns)
            deadline = time.monotonic() + 60
            while snaps.next_attempt(ns) is None:
                assert time.monotonic() < deadline, "never refused"
                await asyncio.sleep(0.02)
            refused_at = snaps.clock()
            assert copies == [] and not snaps.status()["namespaces"]
            assert snaps.status()["refused"] == 1
            # just over the bound: counted again after an hour, not at the next search
            next_try = snaps.next_attempt(ns)
            assert next_try is not None and next_try - refused_at > 0.99 * OVER_LIMIT_RETRY
            assert snaps.view(ns) is None and snaps.status()["queued"] == 0
            assert snaps.status()["building"] == 0

    asyncio.run(run())


class _Undercounted(PgSnapshotBuild):
    """A count that says the namespace is empty (as if it grew after it was counted)."""

    async def count(self, namespace: uuid.UUID) -> SnapshotSize:
        return SnapshotSize()


def test_a_stream_that_crosses_its_cap_is_cancelled_mid_read(
        catalog: Settings, tenants: tuple[uuid.UUID, uuid.UUID], copies: list[int]) -> None:
    ns = tenants[1]

    async def run() -> None:
        async with snapshots_on(catalog) as (_pool, snaps):
            assert isinstance(snaps.source, PgEntitySnapshotSource)
            async with snaps.source.build_session() as session:
                size = await session.count(ns)
                cap = size.nbytes() // 2
                undercounted = _Undercounted(session.conn)
                with pytest.raises(SnapshotTooLarge) as crossed:
                    await undercounted.build(ns, lambda _: cap)
                total = size.entities + size.rows + size.pairs
                assert 0 < crossed.value.read < total, "stopped mid-read"
                assert crossed.value.needed > cap
                assert -1 in copies, "a COPY was cut off"
                # the cancelled COPY left the connection usable: the same build, counted
                built = await session.build(ns, lambda s: s.nbytes())
                assert len(built.entity_ids) == size.entities

    asyncio.run(run())


def test_a_refresh_that_grows_a_snapshot_past_the_bound_drops_it(catalog: Settings) -> None:
    ns = _tenant(catalog)
    dsn = catalog.effective_postgres_dsn

    async def run() -> None:
        async with snapshots_on(catalog) as (_pool, snaps):
            assert isinstance(snaps.source, PgEntitySnapshotSource)
            async with snaps.source.build_session() as session:
                size = await session.count(ns)
        bound = size.nbytes() + 3000  # room for about three more entities
        async with snapshots_on(catalog, max_age=1.0, max_bytes=bound) as (_pool, snaps):
            view = await fresh_view(snaps, ns)
            assert view.nbytes() <= bound
            with psycopg.connect(dsn, autocommit=True) as conn:
                for i in range(40):
                    norm = f"grown name {i} {uuid.uuid4().hex}"
                    conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label)"
                                 " VALUES (%s, %s, %s, %s, 'NAME')", (uuid.uuid4(), ns, norm,
                                                                      norm))
            deadline = time.monotonic() + 60
            while snaps.next_attempt(ns) is None:
                assert time.monotonic() < deadline, "the refresh never re-checked the bound"
                await asyncio.sleep(0.05)
            assert snaps.status()["namespaces"] == 0 and snaps.status()["refused"] == 1
            assert snaps.view(ns) is None  # walked in SQL, and not built again at once
            assert snaps.status()["queued"] == 0 and snaps.builds == 1

    asyncio.run(run())


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_failed_builds_back_off_exponentially_up_to_a_cap(catalog: Settings) -> None:
    ns = uuid.uuid4()
    missing = make_conninfo(catalog.effective_postgres_dsn, dbname="brainstream_no_such_db")

    def source(pool: AsyncConnectionPool[AsyncConn]) -> PgEntitySnapshotSource:
        return PgEntitySnapshotSource(pool, conninfo=missing)  # every build fails to connect

    async def run() -> list[float]:
        clock = Clock()
        async with snapshots_on(catalog, source=source, clock=clock) as (_pool, snaps):
            delays: list[float] = []
            for _ in range(9):
                before = snaps.next_attempt(ns)
                assert snaps.view(ns) is None
                deadline = time.monotonic() + 60
                while snaps.next_attempt(ns) == before:
                    assert time.monotonic() < deadline, "the build never failed"
                    await asyncio.sleep(0.01)
                next_try = snaps.next_attempt(ns)
                assert next_try is not None
                delays.append(next_try - clock.now)
                clock.now = next_try - 1  # not yet: a search does not start a build
                snaps.view(ns)
                assert snaps.status()["queued"] == 0 and snaps.status()["building"] == 0
                clock.now = next_try
            return delays

    delays = asyncio.run(run())
    for attempt, delay in enumerate(delays):  # jitter: x0.5-1 of 30 s, 60 s, ... capped
        full = min(BUILD_RETRY_CAP, BUILD_RETRY_BASE * 2 ** attempt)
        assert full / 2 <= delay <= full, (attempt, delays)
    assert delays[:6] == sorted(delays[:6]) and delays[5] >= 16 * delays[0]  # not capped yet
    assert delays[-1] >= BUILD_RETRY_CAP / 2 and max(delays) <= BUILD_RETRY_CAP
