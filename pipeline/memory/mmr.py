"""Maximal marginal relevance: re-rank hits so the top ones are relevant and not repeats.

Each step takes the hit maximising `lam * relevance - (1 - lam) * max cosine to those taken`;
relevance is the hit's fused score scaled to [0, 1] over the candidates, so the two terms are on
one scale. `lam = 1` keeps the fused order; lower values favour variety. Hits without a vector
(not embedded yet) count as similar to nothing. Pure and deterministic (ties keep input order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

T = TypeVar("T")


def mmr(items: Sequence[T], scores: Sequence[float],
        vectors: Sequence[NDArray[np.float32] | None], *, lam: float, k: int) -> list[T]:
    """The first `k` of `items` in MMR order (vectors unit-normalised, or None)."""
    if not 0.0 <= lam <= 1.0:
        raise ValueError("lam must be within [0, 1]")
    if not len(items) == len(scores) == len(vectors):
        raise ValueError("items, scores and vectors must have one entry each")
    low, high = min(scores, default=0.0), max(scores, default=0.0)
    spread = high - low
    relevance = [1.0 if spread == 0 else (s - low) / spread for s in scores]
    left = list(range(len(items)))
    taken: list[int] = []
    similarity = [0.0] * len(items)  # max cosine to the taken ones, kept up to date
    while left and len(taken) < k:
        best = max(left, key=lambda i: (lam * relevance[i] - (1.0 - lam) * similarity[i], -i))
        left.remove(best)
        taken.append(best)
        chosen = vectors[best]
        if chosen is None:
            continue
        for i in left:
            other = vectors[i]
            if other is not None:
                similarity[i] = max(similarity[i], float(other @ chosen))
    return [items[i] for i in taken]
