"""BM25 math and the corpus-statistics cache (pure; the SQL is checked in tests/search/)."""

from __future__ import annotations

import math
import uuid

import pytest
from hypothesis import given, strategies as st

from pipeline.domain import bm25
from pipeline.domain.bm25 import BM25Params, CorpusStats, StatsCache

P = BM25Params()


def test_defaults_and_validation() -> None:
    assert (P.k1, P.b) == (0.9, 0.4)
    for k1, b in ((-0.1, 0.4), (0.9, -0.1), (0.9, 1.1)):
        with pytest.raises(ValueError):
            BM25Params(k1=k1, b=b)


def test_idf_values() -> None:
    assert bm25.idf(10, 1) == pytest.approx(math.log(1 + 9.5 / 1.5))
    assert bm25.idf(10, 10) == pytest.approx(math.log(1 + 0.5 / 10.5))
    assert bm25.idf(1, 1) > 0  # never negative, even for a term in every document


@given(n=st.integers(1, 10_000), df=st.integers(1, 10_000))
def test_idf_is_positive_and_falls_with_df(n: int, df: int) -> None:
    df = min(df, n)
    assert bm25.idf(n, df) > 0
    if df < n:
        assert bm25.idf(n, df) > bm25.idf(n, df + 1)


@given(tf=st.integers(1, 500), doc_len=st.integers(1, 5000),
       avg=st.floats(0.5, 5000), k1=st.floats(0.0, 3.0), b=st.floats(0.0, 1.0))
def test_term_score_saturates_and_normalizes(tf: int, doc_len: int, avg: float, k1: float,
                                             b: float) -> None:
    params = BM25Params(k1=k1, b=b)
    s = bm25.term_score(tf, 2.0, doc_len, avg, params)
    assert 0 < s <= 2.0 * (k1 + 1) + 1e-9
    assert bm25.term_score(tf + 1, 2.0, doc_len, avg, params) >= s - 1e-12
    # a longer document scores no higher for the same tf
    assert bm25.term_score(tf, 2.0, doc_len + 10, avg, params) <= s + 1e-12


def test_b_zero_ignores_length_and_k1_zero_ignores_tf() -> None:
    no_len = BM25Params(k1=1.2, b=0.0)
    assert bm25.term_score(3, 1.0, 10, 100.0, no_len) == bm25.term_score(3, 1.0, 900, 100.0,
                                                                         no_len)
    binary = BM25Params(k1=0.0, b=0.5)
    assert bm25.term_score(1, 1.5, 10, 20.0, binary) == bm25.term_score(9, 1.5, 10, 20.0, binary)


def test_score_known_value() -> None:
    # N=4, one term in 2 docs, tf=3, |d|=8, avgdl=10: computed by hand
    idf = math.log(1 + (4 - 2 + 0.5) / (2 + 0.5))
    expected = idf * 3 * 1.9 / (3 + 0.9 * (1 - 0.4 + 0.4 * 8 / 10))
    assert bm25.score({"harbor": 3, "x": 1}, 8, {"harbor": bm25.idf(4, 2)}, 10.0, P) \
        == pytest.approx(expected, rel=1e-12)


@given(st.dictionaries(st.sampled_from("abcdef"), st.integers(1, 9), min_size=1),
       st.dictionaries(st.sampled_from("abcdefgh"), st.floats(0.01, 5), min_size=1))
def test_score_sums_matching_terms_only(tfs: dict[str, int], idfs: dict[str, float]) -> None:
    total = bm25.score(tfs, 20, idfs, 15.0, P)
    assert total == pytest.approx(sum(bm25.term_score(tfs[t], w, 20, 15.0, P)
                                      for t, w in idfs.items() if t in tfs))
    assert bm25.score(tfs, 20, {**idfs, "zzz": 3.0}, 15.0, P) == pytest.approx(total)


def test_empty_corpus_length_divides_by_one() -> None:
    assert bm25.safe_avg_len(0.0) == 1.0
    assert bm25.term_score(1, 1.0, 0, 0.0, P) == pytest.approx(1.9 / (1 + 0.9 * 0.6))


def test_tsquery_or_quotes_each_lexeme() -> None:
    assert bm25.tsquery_or(["harbor"]) == "'harbor'"
    assert bm25.tsquery_or(["o'brien", "back\\slash", "a|b"]) == \
        "'o''brien' | 'back\\\\slash' | 'a|b'"


def test_stats_cache_ttl_and_eviction() -> None:
    now = [100.0]
    cache = StatsCache(ttl=10, max_entries=2, clock=lambda: now[0])
    ns = uuid.uuid4()
    assert cache.corpus(ns) is None and cache.dfs(ns, ["a"]) == {}
    cache.put(ns, CorpusStats(5, 12.5), {"a": 2, "b": 0})
    assert cache.corpus(ns) == CorpusStats(5, 12.5)
    assert cache.dfs(ns, ["a", "b", "c"]) == {"a": 2, "b": 0}
    assert cache.dfs(uuid.uuid4(), ["a"]) == {}  # per namespace
    cache.put(ns, None, {"c": 1})  # the oldest df entry ("a") is evicted
    assert cache.dfs(ns, ["a", "b", "c"]) == {"b": 0, "c": 1}
    now[0] = 110.0
    assert cache.corpus(ns) is None and cache.dfs(ns, ["b", "c"]) == {}
    off = StatsCache(ttl=0, clock=lambda: now[0])
    off.put(ns, CorpusStats(1, 1.0), {"a": 1})
    assert off.corpus(ns) is None and off.dfs(ns, ["a"]) == {}


# -- MaxScore pruning: exact top k ---------------------------------------------------------------

_TERMS = ["a", "b", "c", "d", "e", "f"]


@given(st.lists(st.dictionaries(st.sampled_from(_TERMS), st.integers(1, 5), max_size=4),
                min_size=1, max_size=40),
       st.lists(st.sampled_from(_TERMS), min_size=1, max_size=6, unique=True),
       st.integers(1, 10), st.integers(0, 60), st.booleans())
def test_maxscore_pruning_keeps_the_exact_top_k(docs: list[dict[str, int]], query: list[str],
                                                k: int, budget: int, tighten: bool) -> None:
    """The searcher's procedure on a corpus in memory: score the rows of the rarest terms, take
    the k-th score; keep the rows holding an essential term whose partial score (essential terms
    only) plus the other terms' upper bounds can still reach it, optionally tightened by the
    k-th best partial score; the top k (score, then index) equals brute force over every row
    holding any query term."""
    params = BM25Params()
    lengths = [sum(d.values()) + 3 for d in docs]
    avg = sum(lengths) / len(lengths)
    dfs = {t: sum(1 for d in docs if t in d) for t in query}
    terms = [t for t in query if dfs[t] > 0]
    if not terms:
        return
    idfs = {t: bm25.idf(len(docs), dfs[t]) for t in terms}

    def top(rows: list[int]) -> list[tuple[float, int]]:
        scored = [(bm25.score(docs[i], lengths[i], idfs, avg, params), i) for i in rows]
        return sorted(scored, key=lambda s: (-s[0], s[1]))[:k]

    def holding(some: list[str]) -> list[int]:
        return [i for i, d in enumerate(docs) if set(d) & set(some)]

    everything = top(holding(terms))
    first = bm25.rarest_terms({t: dfs[t] for t in terms}, budget)
    assert first and set(first) <= set(terms)
    seen = top(holding(first))
    if len(first) == len(terms) or len(seen) < k:
        return  # the searcher scores every matching row then
    theta = seen[-1][0]
    essential = bm25.essential_terms(idfs, theta, params)
    if set(essential) <= set(first):
        assert seen == everything
        return
    slack = sum(bm25.upper_bound(idfs[t], params) for t in terms if t not in essential)
    partial = {i: bm25.score(docs[i], lengths[i], {t: idfs[t] for t in essential}, avg, params)
               for i in holding(essential)}
    floor = theta - slack - 1e-9 * max(1.0, abs(theta))
    kept = [i for i, p in partial.items() if p > floor]
    best = sorted((partial[i] for i in kept), reverse=True)
    if tighten and len(best) >= k:
        v = best[k - 1]
        kept = [i for i in kept if partial[i] > v - slack - 1e-9 * max(1.0, abs(v))]
    assert top(kept) == everything


def test_essential_terms_and_rarest_terms() -> None:
    params = BM25Params(k1=1.0, b=0.5)  # upper bound = 2 * idf
    idfs = {"rare": 5.0, "mid": 2.0, "common": 1.0, "the": 0.5}
    # bounds 10, 4, 2, 1: "the" and "common" together (3) cannot reach 5.5; with "mid" (7) they can
    assert bm25.essential_terms(idfs, 5.5, params) == ["mid", "rare"]
    assert bm25.essential_terms(idfs, 0.0, params) == ["the", "common", "mid", "rare"]
    assert bm25.essential_terms(idfs, 18.0, params) == []  # nothing can reach it
    assert bm25.rarest_terms({"x": 5, "y": 1, "z": 3}, 4) == ["y", "z"]
    assert bm25.rarest_terms({"x": 50}, 4) == ["x"]
    assert bm25.rarest_terms({}, 4) == []
