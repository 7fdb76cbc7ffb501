"""One writer at a time across processes: a Postgres session advisory lock held on a connection
of its own for as long as the writer runs (the graph relay, the lexical index's writer)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from psycopg_pool import ConnectionPool


@contextmanager
def single_writer(pool: ConnectionPool[Any], key: int, *, wait: bool = False
                  ) -> Iterator[bool]:
    """Hold advisory lock `key` for the block: yields True; or, when another session holds it
    and `wait` is off, yields False at once. The lock goes with the block (or the session)."""
    with pool.connection() as conn:
        if wait:
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        else:
            got = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if not got or not got[0]:
                yield False
                return
        try:
            yield True
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
