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
from psycopg.abc import Buffer

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


class TupleReader:
    """The bytes of a binary COPY, fed as they arrive in whatever pieces, cut into batches of
    whole `dtype` tuples for `on_batch`; past `most` tuples `feed` raises `over(tuples
    received)`."""

    def __init__(self, dtype: np.dtype[Any], on_batch: Callable[[Records], None], *, most: int,
                 over: Callable[[int], Exception], batch_bytes: int = BATCH_BYTES) -> None:
        self.dtype, self.on_batch, self.most, self.over = dtype, on_batch, most, over
        self.batch_bytes = batch_bytes
        self._pending = bytearray()
        self._header = _HEADER
        self._body = 0  # bytes of tuples (and the trailer) received
        self.delivered = 0

    def feed(self, chunk: Buffer) -> None:
        """Take the next piece of the stream."""
        data = memoryview(chunk)
        if self._header:
            skip = min(self._header, len(data))
            data, self._header = data[skip:], self._header - skip
        self._pending += data
        self._body += len(data)
        if self._body // self.dtype.itemsize > self.most:  # the trailer never makes a tuple
            raise self.over(self._body // self.dtype.itemsize)
        if len(self._pending) >= self.batch_bytes:
            self._flush()

    def finish(self) -> int:
        """Hand on the last tuples; how many tuples the stream held."""
        self._flush()
        if bytes(self._pending) != _TRAILER or self._header:
            raise ValueError(f"a binary COPY ended with {len(self._pending)} stray bytes")
        return self.delivered

    def _flush(self) -> None:
        size = self.dtype.itemsize
        whole = len(self._pending) // size
        if whole:
            block = bytes(self._pending[: whole * size])
            del self._pending[: whole * size]
            self.on_batch(np.frombuffer(block, dtype=self.dtype, count=whole))
            self.delivered += whole


async def stream_copy(conn: AsyncConn, statement: sql.Composed, dtype: np.dtype[Any],
                      on_batch: Callable[[Records], None], *, most: int,
                      over: Callable[[int], Exception]) -> int:
    """Run a binary COPY TO STDOUT of fixed-width `dtype` tuples, handing each batch of whole
    tuples to `on_batch`; how many tuples it delivered. Past `most` tuples it raises
    `over(tuples received)` at once (psycopg cancels the statement and discards what is in
    flight)."""
    reader = TupleReader(dtype, on_batch, most=most, over=over)
    async with conn.cursor() as cur, cur.copy(statement) as copy:
        async for chunk in copy:
            reader.feed(chunk)
    return reader.finish()
