"""One writer at a time across processes: Postgres session advisory locks held on a connection
of their own for as long as the writer runs (the graph relay's lanes, the lexical index's
writer)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from psycopg_pool import ConnectionPool


@contextmanager
def single_writer(pool: ConnectionPool[Any], key: int | Sequence[int], *, wait: bool = False
                  ) -> Iterator[bool]:
    """Hold advisory lock `key` (or every lock of a sequence, on one connection) for the
    block: yields True; or, when another session holds one and `wait` is off, yields False at
    once, holding none. The locks go with the block (or the session)."""
    keys = [key] if isinstance(key, int) else list(key)
    with pool.connection() as conn:
        held: list[int] = []
        try:
            for k in keys:
                if wait:
                    conn.execute("SELECT pg_advisory_lock(%s)", (k,))
                else:
                    got = conn.execute("SELECT pg_try_advisory_lock(%s)", (k,)).fetchone()
                    if not got or not got[0]:
                        break
                held.append(k)
            yield len(held) == len(keys)
        finally:
            for k in reversed(held):
                conn.execute("SELECT pg_advisory_unlock(%s)", (k,))
