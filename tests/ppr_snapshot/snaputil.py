"""Shared by the PPR snapshot tests: a pool with the process's snapshots over it, and waiting
for a namespace's snapshot to be fresh (or to have read past a moment)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from psycopg_pool import AsyncConnectionPool

from pipeline.ports import EntitySnapshotSource
from pipeline.postgres.pool import AsyncConn, make_async_pool
from pipeline.retrieval.ppr.snapshot import EntitySnapshot
from pipeline.retrieval.ppr.snapshots import PprSnapshots, SnapshotConfig
from pipeline.retrieval.store.ppr_snapshot import PgEntitySnapshotSource
from pipeline.settings import Settings


@asynccontextmanager
async def snapshots_on(
        settings: Settings, max_age: float = 2.0, *, max_bytes: int = 1 << 30,
        pool_size: int = 8,
        source: Callable[[AsyncConnectionPool[AsyncConn]], EntitySnapshotSource] =
        PgEntitySnapshotSource,
        clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[tuple[AsyncConnectionPool[AsyncConn], PprSnapshots]]:
    """A read pool and snapshots over it (from `source(pool)`), closed after."""
    pool = await make_async_pool(settings, max_size=pool_size)
    snaps = PprSnapshots(source(pool), SnapshotConfig(max_age=max_age, max_bytes=max_bytes),
                         clock)
    try:
        yield pool, snaps
    finally:
        await snaps.close()
        await pool.close()


async def fresh_view(snaps: PprSnapshots, namespace: uuid.UUID, *, after: float = 0.0,
                     timeout: float = 60.0) -> EntitySnapshot:
    """The namespace's snapshot once it answers and its last read started after `after` (a
    monotonic time); the timeout only turns a hang into a failure."""
    deadline = time.monotonic() + timeout
    while True:
        view = snaps.view(namespace)
        if view is not None and view.as_of >= after:
            return view
        assert time.monotonic() < deadline, "the snapshot never caught up"
        await asyncio.sleep(0.05)
