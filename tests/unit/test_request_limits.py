"""The request caps of the read core and the bounded snippet builder (issue 10, items 11-12)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from pipeline.domain.errors import TooManyFilters, TooManyTerms
from pipeline.domain.kinds import KindCatalog
from pipeline.domain.read_model import Filters
from pipeline.retrieval.requests import check_filters, query_text
from pipeline.retrieval.snippets import Snippets, snippet


def test_query_terms_are_counted_distinct_and_capped() -> None:
    assert query_text("crane crane CRANE harbour", max_terms=2) == "crane crane CRANE harbour"
    with pytest.raises(TooManyTerms) as err:
        query_text("one two three", max_terms=2)
    assert err.value.field == "query" and err.value.code == "too_many_terms"


def test_property_filters_are_capped_before_they_are_checked() -> None:
    props = tuple((f"f{i}", ("x",)) for i in range(3))
    check_filters(KindCatalog([]), Filters(properties=props), max_filters=3)
    with pytest.raises(TooManyFilters) as err:
        check_filters(KindCatalog([]), Filters(properties=props), max_filters=2)
    assert err.value.field == "filters"


def test_a_snippet_pattern_holds_at_most_max_terms_words_the_longest() -> None:
    words = " ".join(f"w{i:03d}" for i in range(500)) + " harbourmaster"
    built = Snippets(words, max_terms=32)
    assert len(built.terms) <= 32 and built.terms[0] == "harbourmas"  # the stem of the longest
    assert Snippets("a", max_terms=32).pattern is None  # one-letter words are not matched


def test_the_earliest_query_word_centres_the_snippet() -> None:
    text = ("Intro words. " * 30) + "The crane at the harbour. " + ("Tail words. " * 30)
    out = snippet(text, "harbour crane", width=60)
    assert out.startswith("…") and "crane" in out


@given(st.text(max_size=300), st.text(max_size=60))
def test_snippets_never_fail_and_stay_near_the_width(text: str, query: str) -> None:
    out = Snippets(query, width=80)(text)
    assert len(out) <= 82  # two ellipses at most beyond the width
