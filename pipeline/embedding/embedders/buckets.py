"""Length buckets: which texts a transformer encodes together.

A batch is padded to its longest text, so texts of similar token length go together: the indices
sorted by length, cut into consecutive batches of at most `size`. Of all ways to cut texts into
batches of these sizes this pads the fewest slots (the longest texts share a batch, and so on
down).
"""

from __future__ import annotations

from collections.abc import Sequence


def length_buckets(lengths: Sequence[int], size: int) -> list[list[int]]:
    """The indices of `lengths` in ascending length (ties in input order), in batches of at
    most `size`; every index appears once."""
    if size < 1:
        raise ValueError("size must be at least 1")
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    return [order[start:start + size] for start in range(0, len(order), size)]
