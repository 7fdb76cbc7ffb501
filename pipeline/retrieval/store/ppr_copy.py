"""A binary COPY read as a stream of fixed-width tuples, for the PPR snapshot build
(`ppr_snapshot.py`): handed on batch by batch (never the whole answer in memory at once), into
arrays allocated once for the length the build counted, and cancelled as soon as it delivers
more tuples than the build may hold.

Binary COPY: a 19-byte header, then per tuple a field count (int16) and per field its length
(int32) and bytes, then an int16 -1. Every column the build copies is NOT NULL and of fixed
width, so a tuple is a numpy record. Big-endian.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from psycopg import sql

from pipeline.postgres.pool import AsyncConn

_HEADER = 19
_TRAILER = b"\xff\xff"
# Tuples are parsed once this many bytes have arrived (about 25,000 mention pairs): a batch is
# small beside the arrays it fills, and large enough that numpy's per-call cost does not count.
BATCH_BYTES = 1 << 20

Records = np.ndarray[Any, np.dtype[Any]]


class GrowingArray:
    """A 1-D array filled batch by batch: allocated once for the length expected, doubled only
    when more arrives than was counted."""

    def __init__(self, dtype: np.dtype[Any] | str | type, expected: int) -> None:
        self._values: Records = np.empty(max(expected, 16), dtype=dtype)
        self._n = 0

    def extend(self, more: Records) -> None:
        """Append `more` (cast to the array's type)."""
        end = self._n + len(more)
        if end > len(self._values):
            grown = np.empty(max(end, 2 * len(self._values)), dtype=self._values.dtype)
            grown[: self._n] = self._values[: self._n]
            self._values = grown
        self._values[self._n: end] = more
        self._n = end

    def values(self) -> Records:
        """What was appended (a view, no copy)."""
        return self._values[: self._n]


async def stream_copy(conn: AsyncConn, statement: sql.Composed, dtype: np.dtype[Any],
                      on_batch: Callable[[Records], None], *, most: int,
                      over: Callable[[int], Exception]) -> int:
    """Run a binary COPY TO STDOUT of fixed-width `dtype` tuples, handing each batch of whole
    tuples to `on_batch`; how many tuples it delivered. Past `most` tuples it raises
    `over(tuples received)` at once (psycopg cancels the statement and discards what is in
    flight)."""
    pending = bytearray()
    header = _HEADER
    body = 0  # bytes of tuples (and the trailer) received
    delivered = 0
    size = dtype.itemsize

    def flush() -> None:
        nonlocal delivered
        whole = len(pending) // size
        if whole:
            block = bytes(pending[: whole * size])
            del pending[: whole * size]
            on_batch(np.frombuffer(block, dtype=dtype, count=whole))
            delivered += whole

    async with conn.cursor() as cur, cur.copy(statement) as copy:
        async for chunk in copy:
            data = memoryview(chunk)
            if header:
                skip = min(header, len(data))
                data, header = data[skip:], header - skip
            pending += data
            body += len(data)
            if body // size > most:  # the 2-byte trailer never makes a tuple
                raise over(body // size)
            if len(pending) >= BATCH_BYTES:
                flush()
    flush()
    if bytes(pending) != _TRAILER:
        raise ValueError(f"a binary COPY ended with {len(pending)} stray bytes")
    return delivered
