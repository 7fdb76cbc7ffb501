"""Fusion, decay, promotion and snippets: invariants of the ranking math."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given, strategies as st

from pipeline.domain.read_model import Hit, RowMeta
from pipeline.retrieval.fusion import decay_factor, fuse_and_promote, promote, rrf
from pipeline.retrieval.snippets import snippet

IDS = [uuid.UUID(int=i) for i in range(1, 40)]
channel = st.lists(st.sampled_from(IDS), max_size=20, unique=True).map(
    lambda ids: [Hit(i, 1.0 / (n + 1)) for n, i in enumerate(ids)])


@given(st.dictionaries(st.sampled_from(["lexical", "trigram", "dense"]), channel))
def test_rrf_is_order_independent_and_deterministic(channels: dict[str, list[Hit]]) -> None:
    forward = rrf(channels)
    backward = rrf(dict(reversed(list(channels.items()))))
    assert [(f.id, round(f.score, 12)) for f in forward] == \
        [(f.id, round(f.score, 12)) for f in backward]
    assert all(a.score >= b.score for a, b in itertools.pairwise(forward))
    assert {f.id for f in forward} == {h.id for hits in channels.values() for h in hits}


def test_rrf_rewards_agreement_over_a_single_top_rank() -> None:
    a, b, c = IDS[:3]
    fused = rrf({"lexical": [Hit(a, 9), Hit(b, 8)], "dense": [Hit(c, 0.9), Hit(b, 0.8)]}, k=60)
    assert fused[0].id == b
    assert fused[0].ranks == {"dense": 2, "lexical": 2}
    assert abs(fused[0].score - 2 / 62) < 1e-12


def test_decay_is_mild_and_monotone() -> None:
    now = datetime(2026, 11, 30, tzinfo=UTC)
    assert decay_factor(now, now, 0.01) == 1.0
    assert decay_factor(now - timedelta(days=10), now, 0.0) == 1.0
    assert 1.0 > decay_factor(now - timedelta(days=10), now, 0.01) > \
        decay_factor(now - timedelta(days=100), now, 0.01) > 0
    assert decay_factor(now + timedelta(days=3), now, 0.5) == 1.0


def _meta(row: uuid.UUID, parent: uuid.UUID | None) -> RowMeta:
    return RowMeta(row, parent)


def test_promotion_groups_parts_under_parents_with_evidence() -> None:
    parent, other = IDS[0], IDS[1]
    p1, p2, p3 = IDS[2:5]
    meta = {p1: _meta(p1, parent), p2: _meta(p2, parent), p3: _meta(p3, parent),
            other: _meta(other, None)}
    fused = rrf({"lexical": [Hit(p2, 3), Hit(other, 2), Hit(p1, 1), Hit(p3, 0.5)]})
    promoted = promote(fused, meta, evidence_n=2)
    assert [p.id for p in promoted] == [parent, other]
    assert [e[0] for e in promoted[0].evidence] == [p2, p1]
    assert promoted[1].evidence == ()  # an object hit by itself has no part evidence
    assert promote(fused, {}, evidence_n=2) == []  # rows gone since the search: dropped


@given(st.lists(st.sampled_from(IDS[5:20]), unique=True, min_size=1))
def test_promotion_never_loses_or_invents_objects(rows: list[uuid.UUID]) -> None:
    parents = IDS[:5]
    meta = {r: _meta(r, parents[i % 5] if i % 3 else None) for i, r in enumerate(rows)}
    fused = rrf({"c": [Hit(r, 1.0) for r in rows]})
    promoted = promote(fused, meta)
    assert {p.id for p in promoted} == {m.parent_id or m.id for m in meta.values()}


def test_snippet_centres_on_the_match() -> None:
    text = ("Intro words. " * 30) + "The warehouse rollout in Rotterdam starts in May. " + \
        ("Tail words. " * 30)
    out = snippet(text, "rotterdam warehouses", width=120)
    assert "warehouse" in out and out.startswith("…") and out.endswith("…")
    assert len(out) <= 124
    assert snippet("short text", "nothing") == "short text"
    assert snippet(text, "zzz", width=50).startswith("Intro")


def test_fusion_over_objects_lets_each_channel_vote_once_per_document() -> None:
    long_doc, short_doc = IDS[0], IDS[1]
    parts = IDS[2:8]  # six mediocre parts of the long document
    best, other = IDS[8], IDS[9]  # the short document's single part; a third object
    meta = ({p: _meta(p, long_doc) for p in parts}
            | {best: _meta(best, short_doc), other: _meta(other, None)})
    # the long document: first in one channel, third in the other, and many more part hits;
    # the short document: second and first
    channels = {"lexical": [Hit(parts[0], 9), Hit(best, 8), *(Hit(p, 1) for p in parts[1:])],
                "dense": [Hit(best, 0.9), Hit(other, 0.7), Hit(parts[5], 0.5)]}
    promoted = fuse_and_promote(channels, meta, k=60, evidence_n=3)
    assert [p.id for p in promoted] == [short_doc, long_doc, other]
    assert promoted[0].score == 1 / 61 + 1 / 62
    assert promoted[1].score == 1 / 63 + 1 / 61  # its other parts add nothing
    # evidence: the long document's parts by their own fused score, at most evidence_n
    assert [e[0] for e in promoted[1].evidence] == [parts[5], parts[0], parts[1]]
    assert fuse_and_promote(channels, {}, k=60) == []


@given(st.lists(st.sampled_from(IDS[5:20]), unique=True, min_size=1),
       st.integers(min_value=0, max_value=100))
def test_fusion_over_objects_keeps_every_object_once(rows: list[uuid.UUID], k: int) -> None:
    parents = IDS[:5]
    meta = {r: _meta(r, parents[i % 5] if i % 3 else None) for i, r in enumerate(rows)}
    promoted = fuse_and_promote({"a": [Hit(r, 1.0) for r in rows],
                                 "b": [Hit(r, 1.0) for r in reversed(rows)]}, meta, k=k)
    assert sorted(p.id for p in promoted) == sorted({m.parent_id or m.id for m in meta.values()})
    assert [p.score for p in promoted] == sorted((p.score for p in promoted), reverse=True)


def test_a_channel_weight_scales_its_vote_and_zero_adds_nothing() -> None:
    a, b = IDS[:2]
    channels = {"lexical": [Hit(a, 9), Hit(b, 8)], "trigram": [Hit(b, 0.9), Hit(a, 0.8)]}
    even = rrf(channels, k=10)
    assert even[0].score == even[1].score  # one first and one second rank each
    half = rrf(channels, k=10, weights={"trigram": 0.5})
    assert [f.id for f in half] == [a, b]
    assert half[0].score == 1 / 11 + 0.5 / 12
    meta = {a: _meta(a, None), b: _meta(b, None)}
    muted = fuse_and_promote(channels, meta, k=10, weights={"trigram": 0.0})
    assert [(p.id, p.score) for p in muted] == [(a, 1 / 11), (b, 1 / 12)]


@given(st.uuids(), st.uuids())
def test_ties_order_by_id_as_the_ids_text_would(a: uuid.UUID, b: uuid.UUID) -> None:
    # the fusion breaks ties by the UUID itself (no text made per row): the same order
    assert (a < b) == (str(a) < str(b))
