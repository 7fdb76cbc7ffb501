"""A link group's timeline (pipeline/domain/validity.py): the believed timeline depends on the
set of assertions, not the order they arrive in; a functional group never holds two targets at
once; intervals are ordered."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings, strategies as st

from pipeline.domain.validity import (
    Assertion,
    Version,
    holding_at,
    recompute,
    timeline,
    undated_put,
)

T0 = datetime(2020, 1, 1, tzinfo=UTC)
TARGETS = [uuid.UUID(int=n) for n in (1, 2, 3)]


def day(n: int) -> datetime:
    return T0 + timedelta(days=n)


def _said(v: Version) -> tuple[Any, ...]:
    return (v.to_id, v.state, v.valid_from, v.valid_to, v.asserted_to, dict(v.meta))


def fold(assertions: list[Assertion], *, functional: bool) -> list[Version]:
    """Apply the assertions one by one as the write path does: each recomputes the group from
    the believed versions and the diff is applied to them."""
    believed: list[tuple[int, Version]] = []
    key = itertools.count()
    for a in assertions:
        _, change = recompute(believed, a, functional=functional)
        believed = [(k, v) for k, v in believed if k not in change.invalidate]
        believed += [(next(key), v) for v in change.insert]
    return [v for _, v in believed]


@st.composite
def groups(draw: st.DrawFn) -> tuple[bool, list[Assertion]]:
    functional = draw(st.booleans())
    starts = draw(st.lists(st.integers(0, 60), min_size=1, max_size=6, unique=True))
    always = draw(st.booleans())
    out = []
    for n, start in enumerate(starts):
        to = draw(st.sampled_from(TARGETS)) if functional else TARGETS[0]
        valid_from = None if always and n == 0 else day(start)
        if draw(st.integers(0, 3)) == 0 and valid_from is not None:
            out.append(Assertion(to, "ended", valid_from))
            continue
        length = draw(st.one_of(st.none(), st.integers(1, 30)))
        base = valid_from or day(0)
        out.append(Assertion(to, "holds", valid_from,
                             None if length is None else base + timedelta(days=length),
                             {"note": f"a{n}"}))
    return functional, out


def _start(v: Version) -> datetime:
    return v.valid_from or datetime.min.replace(tzinfo=UTC)


@settings(max_examples=300, deadline=None)
@given(groups(), st.randoms(use_true_random=False))
def test_any_arrival_order_gives_the_same_timeline(group: tuple[bool, list[Assertion]],
                                                   rnd: Any) -> None:
    functional, assertions = group
    shuffled = list(assertions)
    rnd.shuffle(shuffled)
    at_once = sorted(map(_said, timeline(assertions, functional=functional)), key=repr)
    assert sorted(map(_said, fold(shuffled, functional=functional)), key=repr) == at_once
    assert sorted(map(_said, fold(assertions, functional=functional)), key=repr) == at_once


@settings(max_examples=300, deadline=None)
@given(groups())
def test_intervals_are_ordered_and_functional_groups_never_overlap(
        group: tuple[bool, list[Assertion]]) -> None:
    functional, assertions = group
    versions = timeline(assertions, functional=functional)
    holding = [v for v in versions if v.state == "holds"]
    for v in holding:
        assert v.valid_to is None or v.valid_from is None or v.valid_from < v.valid_to
        assert v.valid_to is None or v.asserted_to is None or v.valid_to <= v.asserted_to
    assert [_start(v) for v in versions] == sorted(_start(v) for v in versions)
    if functional:
        for a, b in itertools.combinations(holding, 2):
            a_end = a.valid_to or datetime.max.replace(tzinfo=UTC)
            b_end = b.valid_to or datetime.max.replace(tzinfo=UTC)
            assert a_end <= _start(b) or b_end <= _start(a), (a, b)
    for n in range(0, 70, 7):
        assert not functional or len(holding_at(versions, day(n))) <= 1


def test_a_late_earlier_put_of_another_target_is_cut_by_the_later_one() -> None:
    a, b = TARGETS[:2]
    versions = fold([Assertion(b, "holds", day(10)), Assertion(a, "holds", day(0))],
                    functional=True)
    assert sorted((v.to_id, v.valid_from, v.valid_to) for v in versions) == \
        [(a, day(0), day(10)), (b, day(10), None)]
    assert holding_at(versions, day(5)).keys() == {a}
    assert holding_at(versions, day(15)).keys() == {b}


def test_a_correction_replaces_the_assertion_with_the_same_start() -> None:
    a = TARGETS[0]
    versions = fold([Assertion(a, "holds", day(0), None, {"role": "x"}),
                     Assertion(a, "holds", day(0), None, {"role": "y"})], functional=False)
    assert [dict(v.meta) for v in versions] == [{"role": "y"}]


def test_a_delete_ends_its_link_only() -> None:
    a, b = TARGETS[:2]
    versions = fold([Assertion(a, "holds", day(0)), Assertion(b, "ended", day(5)),
                     Assertion(a, "ended", day(8))], functional=True)
    holds = [(v.to_id, v.valid_from, v.valid_to) for v in versions if v.state == "holds"]
    assert holds == [(a, day(0), day(8))]
    assert not holding_at(versions, day(9))


def test_a_retraction_lets_the_cut_version_run_on() -> None:
    a, b = TARGETS[:2]
    believed = [(1, v) for v in timeline([Assertion(a, "holds", day(0)),
                                          Assertion(b, "holds", day(10))], functional=True)]
    versions, change = recompute(believed, None, functional=True, retract=b)
    assert [(v.to_id, v.valid_from, v.valid_to) for v in versions] == [(a, day(0), None)]
    assert len(change.invalidate) == 2 and len(change.insert) == 1


def test_an_undated_put_holds_always_then_from_its_time() -> None:
    a, b = TARGETS[:2]
    first = Assertion(a, "holds", None, None, {"note": "x"})
    assert undated_put([], first, day(5)) is first  # no history: always
    versions = timeline([first, Assertion(a, "ended", day(3))], functional=False)
    again = undated_put(versions, first, day(5))  # deleted before: holds again from now
    assert again is not None and (again.valid_from, again.asserted_to) == (day(5), None)
    holding = timeline([first], functional=True)
    assert undated_put(holding, first, day(5)) is None  # the same, still holding: nothing
    takeover = undated_put(holding, Assertion(b, "holds", None), day(5))
    assert takeover is not None and takeover.valid_from == day(5)
