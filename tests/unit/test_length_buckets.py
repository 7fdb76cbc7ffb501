"""Length buckets: every text encoded once, in batches of similar length that pad the fewest
slots."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, strategies as st

from pipeline.embedding.embedders.buckets import length_buckets

lengths_and_size = st.tuples(st.lists(st.integers(1, 256), max_size=200), st.integers(1, 70))


def padded_slots(lengths: list[int], batches: list[list[int]]) -> int:
    """Token slots the batches pad: each is padded to its longest text."""
    return sum(len(b) * max(lengths[i] for i in b) - sum(lengths[i] for i in b) for b in batches)


def in_order(count: int, size: int) -> list[list[int]]:
    return [list(range(start, min(start + size, count))) for start in range(0, count, size)]


@given(lengths_and_size)
def test_every_text_once_in_full_batches(case: tuple[list[int], int]) -> None:
    lengths, size = case
    batches = length_buckets(lengths, size)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert all(len(b) == size for b in batches[:-1])
    assert all(0 < len(b) <= size for b in batches)


@given(lengths_and_size)
def test_lengths_ascend_and_ties_keep_input_order(case: tuple[list[int], int]) -> None:
    lengths, size = case
    order = [i for b in length_buckets(lengths, size) for i in b]
    for a, b in pairwise(order):
        assert (lengths[a], a) < (lengths[b], b)


@given(lengths_and_size, st.randoms(use_true_random=False))
def test_pads_no_more_than_any_other_order(case: tuple[list[int], int], rng: object) -> None:
    lengths, size = case
    shuffled = list(range(len(lengths)))
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    other = [[shuffled[i] for i in b] for b in in_order(len(lengths), size)]
    assert padded_slots(lengths, length_buckets(lengths, size)) <= padded_slots(lengths, other)


def test_a_claim_of_mixed_lengths() -> None:
    lengths = [256, 12, 240, 30, 256, 18]
    assert length_buckets(lengths, 2) == [[1, 5], [3, 2], [0, 4]]
    assert padded_slots(lengths, length_buckets(lengths, 2)) == 6 + 210
    assert padded_slots(lengths, in_order(6, 2)) == 244 + 210 + 238


def test_refuses_an_empty_batch_size() -> None:
    with pytest.raises(ValueError):
        length_buckets([3, 4], 0)
