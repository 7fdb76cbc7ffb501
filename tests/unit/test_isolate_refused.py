"""The claim-compute-store loop the embedding, extraction and message extractor workers share
(`pipeline/domain/retry.py: isolate_refused`): every row is stored once or failed once; a refused
row fails alone (after its lighter form, when it has one, was refused too); an outage fails the
batch whole without halving it."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, strategies as st

from pipeline.domain.errors import BrainstreamError, InvalidInput, Unavailable
from pipeline.domain.retry import isolate_refused

Row = tuple[int, bool]  # (id, light: the lighter form was tried)


def _run(n: int, refused: set[int], *, light_ok: frozenset[int] | set[int] = frozenset(),
         outage: bool = False, lighter: bool = False
         ) -> tuple[list[Row], list[tuple[list[Row], str]], int]:
    stored: list[Row] = []
    failed: list[tuple[list[Row], str]] = []
    calls = 0

    def compute(batch: Sequence[Row]) -> list[int]:
        nonlocal calls
        calls += 1
        if outage:
            raise Unavailable("down")
        if any(i in refused and not (light and i in light_ok) for i, light in batch):
            raise InvalidInput("refused", field="text")
        return [i * 10 for i, _ in batch]

    def store(batch: Sequence[Row], values: list[int]) -> None:
        assert values == [i * 10 for i, _ in batch]
        stored.extend(batch)

    def fail(batch: Sequence[Row], exc: BrainstreamError) -> None:
        failed.append((list(batch), exc.code))

    isolate_refused([(i, False) for i in range(n)], compute, store=store, fail=fail,
                    attempts=2, max_wait=0.0,
                    lighter=(lambda r: None if r[1] else (r[0], True)) if lighter else None)
    return stored, failed, calls


@given(st.integers(1, 40), st.sets(st.integers(0, 39)))
def test_refused_rows_fail_alone_and_the_rest_is_stored(n: int, refused: set[int]) -> None:
    refused = {i for i in refused if i < n}
    stored, failed, _ = _run(n, refused)
    assert sorted(i for i, _ in stored) == sorted(set(range(n)) - refused)
    assert all(len(batch) == 1 and code == "invalid_input" for batch, code in failed)
    assert sorted(batch[0][0] for batch, _ in failed) == sorted(refused)


@given(st.integers(1, 20), st.sets(st.integers(0, 19)), st.sets(st.integers(0, 19)))
def test_a_lighter_form_is_tried_once_before_failing(n: int, refused: set[int],
                                                      light_ok: set[int]) -> None:
    refused = {i for i in refused if i < n}
    stored, failed, _ = _run(n, refused, light_ok=light_ok, lighter=True)
    rescued = refused & light_ok
    assert sorted(i for i, _ in stored) == sorted(set(range(n)) - refused | rescued)
    assert all(light for i, light in stored if i in rescued)
    assert sorted(batch[0] for batch, _ in failed) == sorted((i, True) for i in refused - rescued)


def test_an_outage_fails_the_batch_whole_after_the_retries() -> None:
    stored, failed, calls = _run(8, set(), outage=True)
    assert stored == [] and calls == 2
    assert failed == [([(i, False) for i in range(8)], "unavailable")]
