"""Length buckets: which texts a transformer encodes together.

A batch is padded to its longest text, so texts of similar token length go together: sorted by
length, cut into consecutive batches. Where to cut is a trade: each batch costs a fixed overhead
(one call through the model), each token slot a share of the forward pass, padded or not. The
cuts that minimise slots + `call_cost` x batches over the sorted texts are found by dynamic
programming (a batch's longest text is its last, so a batch's cost depends on its two ends only).
"""

from __future__ import annotations

from collections.abc import Sequence


def length_buckets(lengths: Sequence[int], max_size: int, *, call_cost: float = 0.0
                   ) -> list[list[int]]:
    """The indices of `lengths` in ascending length (ties in input order), cut into batches of
    at most `max_size` that minimise the token slots (each batch padded to its longest) plus
    `call_cost` per batch; every index appears once. With `call_cost` 0 nothing is padded that
    need not be; the larger it is, the fewer and fuller the batches."""
    if max_size < 1:
        raise ValueError("max_size must be at least 1")
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    sizes = [lengths[i] for i in order]
    # best[i]: the least cost of the first i sorted texts; cut[i]: where its last batch starts
    best = [0.0] * (len(sizes) + 1)
    cut = [0] * (len(sizes) + 1)
    for end in range(1, len(sizes) + 1):
        longest = sizes[end - 1]
        best[end], cut[end] = min(
            (best[start] + (end - start) * longest + call_cost, start)
            for start in range(max(0, end - max_size), end))
    batches: list[list[int]] = []
    end = len(sizes)
    while end:
        batches.append(order[cut[end]:end])
        end = cut[end]
    return batches[::-1]
