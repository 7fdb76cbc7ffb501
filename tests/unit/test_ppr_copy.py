"""`TupleReader` (pipeline/retrieval/store/ppr_copy.py): a binary COPY cut in any pieces yields
every tuple once, in order, in batches of whole tuples; past its cap it stops at the piece that
crossed it; a stream cut short is refused."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, strategies as st

from pipeline.retrieval.store.ppr_copy import TupleReader

PAIR = np.dtype([("n", ">i2"), ("l0", ">i4"), ("row", "S16"), ("l1", ">i4"), ("entity", "S16")])
HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)


class Over(Exception):
    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.n = n


def _stream(n: int) -> tuple[np.ndarray, bytes]:  # type: ignore[type-arg]
    records = np.zeros(n, dtype=PAIR)
    records["n"], records["l0"], records["l1"] = 2, 16, 16
    records["row"] = [i.to_bytes(16, "big") for i in range(n)]
    records["entity"] = [(i * 7 + 1).to_bytes(16, "big") for i in range(n)]
    return records, HEADER + records.tobytes() + b"\xff\xff"


def _pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    at = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(at)]


@given(st.integers(0, 300), st.lists(st.integers(0, 10**6), max_size=40),
       st.integers(1, 2000))
def test_any_pieces_give_every_tuple_once_in_order(n: int, cuts: list[int], batch: int
                                                   ) -> None:
    records, data = _stream(n)
    batches: list[np.ndarray] = []  # type: ignore[type-arg]
    reader = TupleReader(PAIR, lambda b: batches.append(b.copy()), most=n, over=Over,
                         batch_bytes=batch)
    for piece in _pieces(data, cuts):
        reader.feed(piece)
    assert reader.finish() == n
    got = np.concatenate(batches) if batches else np.zeros(0, dtype=PAIR)
    assert got.tolist() == records.tolist()


@given(st.integers(1, 200), st.integers(0, 199), st.lists(st.integers(0, 10**6), max_size=20))
def test_a_stream_past_its_cap_stops_at_the_piece_that_crossed_it(
        n: int, most: int, cuts: list[int]) -> None:
    _, data = _stream(n)
    if most >= n:
        return
    reader = TupleReader(PAIR, lambda b: None, most=most, over=Over)
    fed = 0
    with pytest.raises(Over) as over:
        for piece in _pieces(data, cuts):
            fed += len(piece)
            reader.feed(piece)
    crossed = (fed - len(HEADER)) // PAIR.itemsize
    assert over.value.n == crossed and crossed > most
    assert (fed - len(piece) - len(HEADER)) // PAIR.itemsize <= most  # the piece before fit


def test_a_stream_cut_short_is_refused() -> None:
    _, data = _stream(3)
    reader = TupleReader(PAIR, lambda b: None, most=3, over=Over)
    reader.feed(data[:-5])
    with pytest.raises(ValueError):
        reader.finish()
