"""The second stage's fusion of the first-stage list and the PPR list (`multihop.fuse_stages`):
the PPR list's vote weight, and that the fusion stays order-independent."""

from __future__ import annotations

import uuid

from hypothesis import given, settings, strategies as st

from pipeline.domain.read_model import Hit
from pipeline.retrieval.fusion import Promoted
from pipeline.retrieval.ppr.multihop import fuse_stages
from pipeline.retrieval.ppr.stage import PprResult

A, B, C = (uuid.UUID(int=i) for i in (1, 2, 3))


def _first(*ids: uuid.UUID) -> list[Promoted]:
    return [Promoted(i, 1.0 / rank, ()) for rank, i in enumerate(ids, start=1)]


def _ppr(*ids: uuid.UUID) -> PprResult:
    return PprResult([Hit(i, 1.0 / rank) for rank, i in enumerate(ids, start=1)], [])


def test_the_ppr_lists_weight_scales_its_vote() -> None:
    # A leads the first stage alone, B the PPR list alone, C is second in both
    first, ppr = _first(A, C), _ppr(B, C)
    even, ranks = fuse_stages(first, ppr, {}, k=5, evidence_n=3)
    assert [p.id for p in even] == [C, A, B]  # A and B tie at 1/6: by id
    assert ranks[B].first is None and ranks[B].ppr == 1
    lighter, _ = fuse_stages(first, ppr, {}, k=5, evidence_n=3, ppr_weight=0.8)
    assert [p.id for p in lighter] == [C, A, B]
    assert lighter[2].score == 0.8 / 6
    heavier, _ = fuse_stages(first, ppr, {}, k=5, evidence_n=3, ppr_weight=1.25)
    assert [p.id for p in heavier] == [C, B, A]


@settings(max_examples=50, deadline=None)
@given(st.permutations([uuid.UUID(int=i) for i in range(1, 7)]),
       st.floats(min_value=0.1, max_value=3.0))
def test_every_object_of_either_list_comes_once(ids: list[uuid.UUID], weight: float) -> None:
    first, ppr = _first(*ids[:4]), _ppr(*ids[2:])
    fused, ranks = fuse_stages(first, ppr, {}, k=5, evidence_n=3, ppr_weight=weight)
    assert sorted(p.id for p in fused) == sorted(ids)
    assert set(ranks) == set(ids)
    assert [p.score for p in fused] == sorted((p.score for p in fused), reverse=True)
