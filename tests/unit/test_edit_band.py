"""`likeness.edit_similarity` with a floor (`at_least`): the proposal pass computes only the band
of the alignment that can keep a pair at its threshold. At or above the floor the answer is the
full computation's; below it, some value below the floor."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from pipeline.entities.likeness import edit_similarity


def full(a: str, b: str) -> float:
    """The optimal string alignment similarity, every cell computed (the reference)."""
    if not a or not b:
        return 0.0
    rows = [list(range(len(b) + 1))]
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(rows[-1][j] + 1, cur[j - 1] + 1,
                         rows[-1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], rows[-2][j - 2] + 1)
        rows.append(cur)
    return 1.0 - rows[-1][len(b)] / max(len(a), len(b))


names = st.text(alphabet="abcde ", max_size=14)


@settings(max_examples=2000, deadline=None)
@given(names, names, st.floats(min_value=0.0, max_value=1.0))
def test_banded_answer_is_exact_at_or_above_the_floor(a: str, b: str, floor: float) -> None:
    reference, banded = full(a, b), edit_similarity(a, b, floor)
    if reference >= floor:
        assert banded == reference
    else:
        assert banded < floor


@settings(max_examples=500, deadline=None)
@given(names, st.data())
def test_near_spellings_keep_their_similarity(a: str, data: st.DataObject) -> None:
    """Pairs a few edits apart, the ones the pass keeps: exact at the pass's floor."""
    b = list(a)
    for _ in range(data.draw(st.integers(0, 2))):
        if b:
            b[data.draw(st.integers(0, len(b) - 1))] = data.draw(st.sampled_from("abcde"))
    floor = 0.75 / 0.9
    if full(a, "".join(b)) >= floor:
        assert edit_similarity(a, "".join(b), floor) == full(a, "".join(b))


def test_without_a_floor_every_pair_is_exact() -> None:
    assert edit_similarity("gandhi", "ghandi") == full("gandhi", "ghandi")
    assert edit_similarity("tolstoy", "dostoevsky") == full("tolstoy", "dostoevsky")
    assert edit_similarity("abc", "xyz") == 0.0
