"""More like this picks a document's terms by tf x idf (pipeline.domain.bm25)."""

from __future__ import annotations

from hypothesis import given, strategies as st

from pipeline.domain.bm25 import distinctive_terms, idf


def test_rare_terms_beat_frequent_common_ones() -> None:
    tfs = {"cell": 3, "chaperonin": 1, "the": 9, "absent": 2}
    dfs = {"cell": 900, "chaperonin": 2, "the": 1000}  # "absent" is in no row
    assert distinctive_terms(tfs, dfs, 1000, 2) == ["chaperonin", "cell"]


@given(st.dictionaries(st.sampled_from("abcdefgh"), st.integers(1, 5), max_size=8),
       st.dictionaries(st.sampled_from("abcdefgh"), st.integers(0, 50), max_size=8),
       st.integers(0, 10))
def test_at_most_max_terms_of_the_document_best_first(tfs: dict[str, int], dfs: dict[str, int],
                                                       max_terms: int) -> None:
    chosen = distinctive_terms(tfs, dfs, 100, max_terms)
    assert len(chosen) <= max_terms and set(chosen) <= {t for t in tfs if dfs.get(t, 0) > 0}
    scores = [tfs[t] * idf(100, dfs[t]) for t in chosen]
    assert scores == sorted(scores, reverse=True)
