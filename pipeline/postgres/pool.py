"""Connection pools for Postgres with the pgvector type registered on every connection: the
synchronous pool of the write path and the operator commands, and the async pool of the read
side (with `read_connection`, which turns an unreachable database into `Unavailable` and a
statement that ran out of time into `QueryTimeout`)."""

from __future__ import annotations

import contextlib
import select
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from pgvector.psycopg import register_vector, register_vector_async
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from pipeline.domain.errors import QueryTimeout, Unavailable
from pipeline.fairness.tenant import current_tenant
from pipeline.postgres.routing import current_route
from pipeline.services.settings import StackSettings


def _configure(conn: psycopg.Connection[Any]) -> None:
    register_vector(conn)
    conn.autocommit = True  # explicit transactions only (`with conn.transaction()`)


def make_pool(settings: StackSettings, *, min_size: int = 1, max_size: int = 4,
              name: str = "brainstream") -> ConnectionPool:
    """An opened pool; statements outside `conn.transaction()` autocommit."""
    pool = ConnectionPool(settings.effective_postgres_dsn, min_size=min_size, max_size=max_size,
                          configure=_configure, name=name, open=False,
                          kwargs={"application_name": name})
    pool.open(wait=True, timeout=30)
    return pool


# -- the read side (async) ----------------------------------------------------------------

AsyncConn = psycopg.AsyncConnection[Any]

# The HNSW walk of a search's dense channel, as every read session starts (the channel's
# candidate depth, 2 x candidate_k): its statement then runs alone, where it took four round
# trips (a transaction to set these locally); a search that needs another depth still sets its
# own in a transaction (`PgPartSearcher.search_dense`).
READ_HNSW_EF_SEARCH = 100
# Searches are planned for their actual parameters: psycopg prepares a statement after 5
# executions and Postgres may then switch to a generic plan that ignores how selective a
# namespace or filter is.
SESSION_OPTIONS = (f"-c plan_cache_mode=force_custom_plan -c hnsw.ef_search={READ_HNSW_EF_SEARCH}"
                   " -c hnsw.iterative_scan=relaxed_order")


async def _configure_async(conn: AsyncConn) -> None:
    await register_vector_async(conn)
    await conn.set_autocommit(True)  # explicit transactions only


async def check_idle_connection(conn: AsyncConn) -> None:
    """The pool's check of a connection leaving it, with no round trip while the server has
    said nothing: an idle connection's socket turns readable only when the server wrote to it,
    and what a server writes to an idle session is its end (the FATAL notice of a shutdown or a
    terminated backend, then EOF). Only then is the connection asked for real (an empty query),
    which raises for a dead one so the pool replaces it. A silent network failure is caught
    by neither this nor a query check (a query waits on the same dead link).

    Saves one round trip per request against `AsyncConnectionPool.check_connection` (GET
    memory's latency is mostly round trips: docs/memory.md).

    Asked with poll(), not select(): select() refuses a descriptor numbered 1024 or more
    (ValueError), so in a process with that many files open every check failed, the pool took
    each healthy connection back and retried until its timeout, and every request was a 503
    (tests/pipeline/test_replay.py after the broker's 20-cycle test, in `make faults`).
    """
    if conn.closed:
        raise psycopg.OperationalError("the connection is closed")
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    if poller.poll(0):
        await AsyncConnectionPool.check_connection(conn)


# How long a read waits for a pooled connection (and for its key's connection share) before it
# fails fast: a database that is down answers 503 in seconds, not psycopg's default 30.
POOL_WAIT_SECONDS = 5.0


async def make_async_pool(settings: StackSettings, *, min_size: int = 1, max_size: int = 8,
                          name: str = "brainstream-read",
                          wait_seconds: float = POOL_WAIT_SECONDS,
                          statement_timeout: float | None = None,
                          dsn: str | None = None, wait_open: bool = True,
                          ) -> AsyncConnectionPool[AsyncConn]:
    """An opened async pool for the read side: pgvector registered, autocommit, and
    `SESSION_OPTIONS` on every session; with `statement_timeout` (seconds)
    Postgres cancels any statement of these sessions that runs longer (one hostile or unlucky
    query cannot hold a connection, and the request waiting on it, for minutes).

    Built to ride out a Postgres restart without restarting the API: every connection is
    checked as it leaves the pool (`check_idle_connection`: a connection the restart broke is
    replaced, not handed to a request), and a request waits at most `wait_seconds` for one, so
    while Postgres is down requests fail fast with `Unavailable` (503) instead of hanging for
    psycopg's default 30 s.

    `dsn` names another server than the settings' primary (the read standby); with
    `wait_open=False` the pool opens without waiting for its first connection (a standby that is
    down must not stop the API from starting).
    """
    options = SESSION_OPTIONS
    if statement_timeout is not None:
        options += f" -c statement_timeout={max(1, round(statement_timeout * 1000))}"
    pool: AsyncConnectionPool[AsyncConn] = AsyncConnectionPool(
        dsn or settings.effective_postgres_dsn, min_size=min_size, max_size=max_size,
        configure=_configure_async, name=name, open=False, timeout=wait_seconds,
        check=check_idle_connection,
        kwargs={"application_name": name, "options": options, "connect_timeout": 5})
    await pool.open(wait=wait_open, timeout=30)
    return pool


@asynccontextmanager
async def read_connection(pool: AsyncConnectionPool[AsyncConn]) -> AsyncIterator[AsyncConn]:
    """A pooled connection; an unreachable database becomes `Unavailable`, a statement
    cancelled by the statement timeout `QueryTimeout`. Within an API request it counts against
    the caller's connection share (`pipeline.fairness.connections`), taken before the pool's.

    Within an API request whose route allows it, the connection is the read standby's instead
    of `pool`'s (the primary's: `pipeline.postgres.routing`); a standby that gives no
    connection sends the request to the primary, and a statement the standby cancelled for a
    conflict with replay is `Unavailable` (the client retries)."""
    tenant = current_tenant()
    share = (tenant.connections.connection(tenant.id) if tenant is not None
             else contextlib.nullcontext())
    route = current_route()
    router = route.router if route is not None else None
    target = pool
    if route is not None and router is not None and router.primary is pool:
        target = await router.pool_for(route)
    try:
        async with contextlib.AsyncExitStack() as held:
            await held.enter_async_context(share)
            if target is not pool and route is not None and router is not None:
                try:
                    conn = await held.enter_async_context(target.connection())
                except (psycopg.OperationalError, PoolTimeout) as exc:
                    target = router.standby_failed(route, exc)
            if target is pool:
                conn = await held.enter_async_context(pool.connection())
            yield conn
    except psycopg.errors.QueryCanceled as exc:
        raise QueryTimeout("the query ran past the read statement timeout") from exc
    except psycopg.errors.SerializationFailure as exc:
        if target is pool:
            raise
        raise Unavailable(f"postgres standby: {exc}") from exc  # a conflict with replay
    except (psycopg.OperationalError, PoolTimeout) as exc:
        raise Unavailable(f"postgres: {exc}") from exc


async def ping_pool(pool: AsyncConnectionPool[AsyncConn], *, timeout: float = 2.0) -> None:
    """One round trip on a pooled connection, waiting at most `timeout` seconds for it (so a
    readiness probe never hangs); raises whatever the pool or the database raised."""
    async with pool.connection(timeout=timeout) as conn:
        await conn.execute("SELECT 1")
