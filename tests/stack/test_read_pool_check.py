"""The read pool's connection check (pipeline/postgres/pool.py: check_idle_connection) on
the real Postgres: a healthy idle connection leaves the pool without a round trip (its backend
never goes active), and one whose backend was terminated is found and replaced, so the request
that follows still gets an answer; also when the connection's descriptor is numbered past 1024,
where select() gives up."""

from __future__ import annotations

import asyncio
import os
import resource
import time
import uuid
from datetime import datetime

import psycopg
import pytest

from pipeline.postgres.pool import check_idle_connection, make_async_pool
from pipeline.settings import Settings

pytestmark = pytest.mark.stack


def _backend(settings: Settings, pid: int) -> tuple[datetime, str] | None:
    """(state_change, state) of one backend: state_change moves whenever it runs a statement."""
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT state_change, state FROM pg_stat_activity WHERE pid = %s",
                           (pid,)).fetchone()
    return (row[0], row[1]) if row else None


async def _check_pool(settings: Settings) -> None:
    pool = await make_async_pool(settings, min_size=1, max_size=1,
                                 name=f"test-pool-check-{uuid.uuid4().hex[:8]}")
    try:
        async with pool.connection() as conn:
            first = (await (await conn.execute("SELECT pg_backend_pid()")).fetchone())[0]
        before = _backend(settings, first)
        assert before is not None and before[1] == "idle", before
        async with pool.connection() as conn:  # the same connection, checked on its way out
            await check_idle_connection(conn)  # and once more by hand: still no statement
        assert _backend(settings, first) == before, "checking an idle connection ran a query"

        with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (first,)).fetchone() == (
                True,)
        deadline = time.monotonic() + 10
        while _backend(settings, first) is not None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert _backend(settings, first) is None, "the backend outlived pg_terminate_backend"
        async with pool.connection() as conn:  # the dead one was found and replaced
            again = (await (await conn.execute("SELECT pg_backend_pid()")).fetchone())[0]
        assert again != first
    finally:
        await pool.close()


def test_idle_check_costs_no_round_trip_and_replaces_a_terminated_connection(
        stack_settings: Settings) -> None:
    asyncio.run(_check_pool(stack_settings))


async def _check_high_descriptor(settings: Settings) -> None:
    pool = await make_async_pool(settings, min_size=1, max_size=1, wait_seconds=3,
                                 name=f"test-pool-fd-{uuid.uuid4().hex[:8]}")
    try:
        async with pool.connection() as conn:
            assert conn.fileno() >= 1024, conn.fileno()
            await check_idle_connection(conn)
            assert (await (await conn.execute("SELECT 1")).fetchone()) == (1,)
        async with pool.connection() as conn:  # checked on its way out of the pool, no 503
            assert (await (await conn.execute("SELECT 2")).fetchone()) == (2,)
    finally:
        await pool.close()


def test_a_connection_past_descriptor_1024_is_checked_not_refused(
        stack_settings: Settings) -> None:
    """A process with many files open (the fault suite's after 40 broker cycles) gets sockets
    numbered past 1024: the check must still pass them, or every request waits out the pool."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the hard limit on open files ({hard}) is below 1200")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    fillers = []
    try:
        while not fillers or fillers[-1] < 1030:
            fillers.append(os.open(os.devnull, os.O_RDONLY))
        asyncio.run(_check_high_descriptor(stack_settings))
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
