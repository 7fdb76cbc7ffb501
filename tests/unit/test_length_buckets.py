"""Length buckets: every text encoded once, in ascending length, cut where padding and calls
cost least."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest
from hypothesis import given, strategies as st

from pipeline.embedding.embedders.buckets import length_buckets

cases = st.tuples(st.lists(st.integers(1, 256), max_size=120), st.integers(1, 20),
                  st.sampled_from([0.0, 1.0, 16.0, 300.0]))


def padded_slots(lengths: list[int], batches: list[list[int]]) -> int:
    """Token slots the batches pad: each is padded to its longest text."""
    return sum(len(b) * max(lengths[i] for i in b) - sum(lengths[i] for i in b) for b in batches)


def cost(lengths: list[int], batches: list[list[int]], call_cost: float) -> float:
    return sum(len(b) * max(lengths[i] for i in b) for b in batches) + call_cost * len(batches)


def in_order(indices: list[int], size: int) -> list[list[int]]:
    return [indices[start:start + size] for start in range(0, len(indices), size)]


@given(cases)
def test_every_text_once_in_ascending_length(case: tuple[list[int], int, float]) -> None:
    lengths, size, call_cost = case
    batches = length_buckets(lengths, size, call_cost=call_cost)
    order = [i for b in batches for i in b]
    assert sorted(order) == list(range(len(lengths)))
    assert all(0 < len(b) <= size for b in batches)
    for a, b in pairwise(order):
        assert (lengths[a], a) < (lengths[b], b)  # ties keep input order


@given(cases, st.randoms(use_true_random=False))
def test_costs_no_more_than_fixed_batches_in_any_order(case: tuple[list[int], int, float],
                                                       rng: object) -> None:
    lengths, size, call_cost = case
    best = cost(lengths, length_buckets(lengths, size, call_cost=call_cost), call_cost)
    ascending = sorted(range(len(lengths)), key=lengths.__getitem__)
    for fixed in range(1, size + 1):
        assert best <= cost(lengths, in_order(ascending, fixed), call_cost) + 1e-9
    shuffled = list(range(len(lengths)))
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    assert best <= cost(lengths, in_order(shuffled, size), call_cost) + 1e-9


@given(cases)
def test_free_calls_pad_nothing_and_dear_calls_fill_batches(
        case: tuple[list[int], int, float]) -> None:
    lengths, size, _ = case
    assert padded_slots(lengths, length_buckets(lengths, size)) == 0
    dear = length_buckets(lengths, size, call_cost=10.0**9)
    assert len(dear) == math.ceil(len(lengths) / size)


def test_a_claim_of_mixed_lengths() -> None:
    lengths = [256, 12, 240, 30, 256, 18, 250]
    # a call is worth 16 slots: 18 pads 12 by 6 and joins it; 30 would pad both by 30 (over 16)
    # and goes alone; 240 and 250 share a batch (10 padded slots), and the 256s join them
    assert length_buckets(lengths, 4, call_cost=16.0) == [[1, 5], [3], [2, 6, 0, 4]]
    assert length_buckets(lengths, 2, call_cost=16.0) == [[1, 5], [3], [2, 6], [0, 4]]
    assert length_buckets(lengths, 2) == [[1], [5], [3], [2], [6], [0, 4]]
    assert length_buckets([], 8, call_cost=16.0) == []


def test_refuses_an_empty_batch_size() -> None:
    with pytest.raises(ValueError):
        length_buckets([3, 4], 0)
