"""The relay's and verify's diff of keyed graph states (`pipeline.outbox.entity_sync`)."""

from __future__ import annotations

from hypothesis import given, strategies as st

from pipeline.outbox.entity_sync import compare_states, diff_states

states = st.dictionaries(st.integers(0, 20), st.integers(0, 3), max_size=15)


@given(states, states)
def test_applying_the_diff_gives_the_desired_state(current: dict[int, int],
                                                   desired: dict[int, int]) -> None:
    # values are the states themselves here: a write is keyed by its own value's key
    keyed_desired = {k: (k, v) for k, v in desired.items()}
    keyed_current = {k: (k, v) for k, v in current.items()}
    writes, deletes = diff_states(keyed_current, keyed_desired)
    after = {k: v for k, v in keyed_current.items() if k not in deletes}
    after.update({k: (k, v) for k, v in writes})
    assert after == keyed_desired
    # nothing that already agrees is written again
    assert len(writes) == sum(1 for k in desired if current.get(k) != desired[k])


@given(states, states)
def test_compare_partitions_the_keys(current: dict[int, int], desired: dict[int, int]) -> None:
    diff = compare_states(current, desired)
    assert set(diff.missing) == set(desired) - set(current)
    assert set(diff.extra) == set(current) - set(desired)
    assert set(diff.stale) == {k for k in set(current) & set(desired) if current[k] != desired[k]}


def test_equal_states_need_nothing() -> None:
    assert diff_states({1: "a", 2: "b"}, {2: "b", 1: "a"}) == ([], [])
    diff = compare_states({1: "a", 3: "c"}, {1: "x", 2: "b"})
    assert (diff.missing, diff.stale, diff.extra) == ([2], [1], [3])
