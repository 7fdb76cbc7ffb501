"""Whose fault a Postgres error is: the database's (it cannot be reached or serve now: retry the
batch) or the statement's (it refused this event's data: dead-letter that one event).

psycopg's exception classes do not say which: it files `ProgramLimitExceeded` (a tsvector or an
index row too big, SQLSTATE 54) under `OperationalError` beside a lost connection, so deciding by
class alone retries a poison event forever and stops its partition. The decision is taken here,
once, from the connection's state and the SQLSTATE class.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from pipeline.domain.errors import BrainstreamError, RejectedByDatabase, Unavailable

# SQLSTATE classes that say nothing about the statement's data, so the same batch may succeed
# later: 08 connection exception, 53 insufficient resources (disk full, out of memory, too many
# connections), 57 operator intervention (shutdown, cancel, cannot connect now), 58 system error
# (I/O errors), 40 transaction rollback (deadlock, serialization failure: a retry succeeds).
OUTAGE_CLASSES = frozenset({"08", "40", "53", "57", "58"})


def is_outage(exc: psycopg.Error, conn: psycopg.Connection[Any] | None) -> bool:
    """Whether `exc` means the database cannot serve right now (rather than refusing the
    statement's data). `conn` is the connection the statement ran on; None when none was
    obtained (connecting failed, the pool timed out)."""
    if isinstance(exc, PoolTimeout):
        return True
    if conn is not None and (conn.closed or conn.broken):
        return True
    if exc.sqlstate is None:
        # No answer from the server: the client could not talk to it (no connection yet), or
        # refused the value itself before sending (a NUL in text, on a healthy connection).
        return conn is None
    return exc.sqlstate[:2] in OUTAGE_CLASSES


def port_error(exc: psycopg.Error, conn: psycopg.Connection[Any] | None) -> BrainstreamError:
    """The port's error for a driver error: `Unavailable` (retry the batch) or
    `RejectedByDatabase` (the event is bad), with the SQLSTATE in the message when there is one."""
    text = f"{type(exc).__name__}: {exc}"
    if is_outage(exc, conn):
        return Unavailable(text)
    if exc.sqlstate is not None:
        text += f" (SQLSTATE {exc.sqlstate})"
    return RejectedByDatabase(text)
