"""BM25 on the real database: scores equal an independent computation from each row's tsvector,
ranking follows them, and the statistics cache never hides new rows."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest

from pipeline.domain.read_model import Filters
from pipeline.retrieval.store.search import PgPartSearcher
from tests.pipelineutil import envelope, put
from tests.search.corpus import K_ALL, run as _run
from tests.search.searchref import Row, apply_events, bm25_reference, load_rows, searchable

pytestmark = pytest.mark.stack

# -- BM25 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["harbor", "cargo vessel", "Rotterdam terminal contract",
                                   "customs tariff tariffs", "audit"])
def test_bm25_scores_equal_an_independent_computation(
        corpus: dict[str, Any], aio: asyncio.Runner, searcher: PgPartSearcher,
        query: str) -> None:
    rows: dict[uuid.UUID, Row] = corpus["rows"]
    ns = corpus["a"]
    lexemes = _run(aio, searcher.query_lexemes(query))
    assert lexemes
    reference = bm25_reference(rows, ns, lexemes, Filters(), [])
    hits = _run(aio, searcher.search_lexical(ns, query, Filters(), [], K_ALL))
    assert len(hits) == len(reference) > 1
    for hit in hits:
        assert hit.score == pytest.approx(reference[hit.id], abs=1e-6, rel=1e-9)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert len(set(round(s, 6) for s in scores)) > 1  # a real ranking, not ties everywhere
    top = _run(aio, searcher.search_lexical(ns, query, Filters(), [], 3))
    assert top == hits[:3]
    # filters narrow the candidates, never the corpus statistics
    narrow = Filters(kinds=("deal",))
    filtered = _run(aio, searcher.search_lexical(ns, query, narrow, [], K_ALL))
    ref_narrow = bm25_reference(rows, ns, lexemes, narrow, [])
    assert {h.id: pytest.approx(h.score, abs=1e-6) for h in filtered} == ref_narrow


def test_bm25_parameters_are_honored(corpus: dict[str, Any], aio: asyncio.Runner,
                                     searcher: PgPartSearcher) -> None:
    rows: dict[uuid.UUID, Row] = corpus["rows"]
    tuned = PgPartSearcher(searcher.pool, k1=1.5, b=0.9, stats_ttl=0)
    lexemes = _run(aio, tuned.query_lexemes("freight warehouse"))
    reference = bm25_reference(rows, corpus["a"], lexemes, Filters(), [], k1=1.5, b=0.9)
    hits = _run(aio, tuned.search_lexical(corpus["a"], "freight warehouse", Filters(), [], K_ALL))
    assert {h.id: h.score for h in hits} == pytest.approx(reference, abs=1e-6)


def test_lexical_stopwords_only_and_odd_characters(
        corpus: dict[str, Any], aio: asyncio.Runner, searcher: PgPartSearcher) -> None:
    ns = corpus["a"]
    assert _run(aio, searcher.search_lexical(ns, "the of and", Filters(), [], 10)) == []
    for odd in ["O'Brien \\ harbor", "harbor & | ! ( ) :* <->", "'harbor'"]:
        hits = _run(aio, searcher.search_lexical(ns, odd, Filters(), [], 5))
        assert hits  # quoting never breaks the tsquery; "harbor" still matches


def test_cached_statistics_still_find_new_rows(
        db: psycopg.Connection[Any], aio: asyncio.Runner, searcher: PgPartSearcher) -> None:
    cached = PgPartSearcher(searcher.pool, stats_ttl=600)
    ns = uuid.uuid4()
    apply_events(db, [put(ns, title="First", content="quayside crane log")])
    assert len(_run(aio, cached.search_lexical(ns, "quayside", Filters(), [], 10))) == 1
    apply_events(db, [put(ns, title="Second", content="another quayside note")])
    hits = _run(aio, cached.search_lexical(ns, "quayside", Filters(), [], 10))
    assert len(hits) == 2  # found at once; only N, avgdl and df wait for the TTL
    fresh = _run(aio, searcher.search_lexical(ns, "quayside", Filters(), [], 10))
    assert {h.id for h in fresh} == {h.id for h in hits}
    assert {h.id: h.score for h in fresh} != {h.id: h.score for h in hits}


# -- postings ------------------------------------------------------------------------------------


def _postings_match_searchable_rows(db: psycopg.Connection[Any], ns: uuid.UUID) -> None:
    rows = load_rows(db)
    expected = {(rid, lex, tf, rows[rid].doc_len)
                for rid in searchable(rows, ns) for lex, tf in rows[rid].tf.items()}
    found = set(db.execute("SELECT row_id, lexeme, tf, doc_len FROM search_postings"
                           " WHERE namespace_id = %s", (ns,)).fetchall())
    assert found == expected


def test_postings_follow_every_change_of_text_and_visibility(db: psycopg.Connection[Any]
                                                             ) -> None:
    """The trigger-kept postings are exactly the searchable rows' lexemes after each step:
    chunked put, shorter re-put (stale parts gone), soft delete, revive, an object without
    content (searchable itself) that later gains parts, and a hard delete (purge)."""
    ns = uuid.uuid4()
    doc = put(ns, title="Harbor logbook", content=" ".join(f"entry{i} cargo" for i in range(60)))
    doc_id = doc["data"]["id"]
    bare = put(ns, title="Crane inventory", summary="cranes and berths")
    steps: list[list[dict[str, Any]]] = [
        [doc, bare],
        [put(ns, id=doc_id, title="Harbor logbook", content="entry1 cargo only now")],
        [envelope("object.soft_delete", ns, {"id": doc_id})],
        [put(ns, id=doc_id, title="Harbor logbook revived", content="entry2 vessel again")],
        [put(ns, id=bare["data"]["id"], title="Crane inventory",
             content=" ".join(f"crane{i}" for i in range(50)))],
    ]
    for events in steps:
        apply_events(db, events)
        _postings_match_searchable_rows(db, ns)
    db.execute("DELETE FROM objects WHERE namespace_id = %s AND parent_id IS NOT NULL", (ns,))
    _postings_match_searchable_rows(db, ns)  # parents without parts are searchable again
    db.execute("DELETE FROM objects WHERE namespace_id = %s", (ns,))
    assert db.execute("SELECT count(*) FROM search_postings WHERE namespace_id = %s",
                      (ns,)).fetchone() == (0,)


@pytest.mark.parametrize("query", ["harbor cargo vessel", "Rotterdam terminal contract audit",
                                   "customs tariff invoice penalty clause", "warehouse delay"])
@pytest.mark.parametrize("k", [1, 3, 7])
def test_maxscore_pruning_returns_the_exact_top_k(
        corpus: dict[str, Any], aio: asyncio.Runner, searcher: PgPartSearcher, query: str,
        k: int) -> None:
    """A budget of one row forces the two-pass path (rarest term first, then the essential
    terms with the floor); the answer is still BM25's exact top k, ties by id."""
    rows: dict[uuid.UUID, Row] = corpus["rows"]
    ns = corpus["a"]
    pruning = PgPartSearcher(searcher.pool, stats_ttl=0, maxscore_budget=1)
    lexemes = _run(aio, pruning.query_lexemes(query))
    reference = bm25_reference(rows, ns, lexemes, Filters(), [])
    expected = sorted(reference.items(), key=lambda i: (-round(i[1], 9), i[0]))[:k]
    hits = _run(aio, pruning.search_lexical(ns, query, Filters(), [], k))
    assert [h.id for h in hits] == [i for i, _ in expected]
    assert [h.score for h in hits] == pytest.approx([s for _, s in expected], abs=1e-6)
    if k == 1:  # the rarest term's rows always hold one: the pruned path ran
        assert pruning.maxscore_pruned == 1
