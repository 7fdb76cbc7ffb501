"""MMR: lambda 1 keeps the fused order, lower lambdas push repeats down; deterministic."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.memory.mmr import mmr

V = [np.array(v, dtype=np.float32) for v in ([1, 0], [1, 0], [0, 1], [0.6, 0.8])]


def test_lambda_one_keeps_the_fused_order() -> None:
    assert mmr("abcd", [4, 3, 2, 1], V, lam=1.0, k=4) == list("abcd")


def test_a_repeat_yields_to_a_different_hit() -> None:
    assert mmr("abcd", [4, 3, 2, 1], V, lam=0.5, k=2) == ["a", "c"]


def test_hits_without_vectors_are_similar_to_nothing_and_k_caps() -> None:
    assert mmr("abc", [3, 2, 1], [V[0], None, V[0]], lam=0.5, k=2) == ["a", "b"]
    assert mmr("", [], [], lam=0.3, k=5) == []


def test_bad_lambda_is_refused() -> None:
    with pytest.raises(ValueError):
        mmr("a", [1], [None], lam=1.5, k=1)
