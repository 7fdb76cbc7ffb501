"""The Tantivy lexical channel on the real database: its BM25 equals an independent computation
over the same analysed text, filters and scope apply inside the engine with the SQL channel's
meaning, each namespace is its own index, near-spellings are found, and the writer keeps the
index in step with Postgres (puts, edits, deletes)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from pipeline.domain.errors import InvalidFilter
from pipeline.domain.read_model import Filters
from pipeline.lexical import changes
from pipeline.lexical.searcher import TantivySearcher
from pipeline.lexical.writer import LexicalWriter
from pipeline.retrieval.store.search import PgPartSearcher
from tests.lexical.reference import tantivy_bm25
from tests.pipelineutil import envelope, put
from tests.search.corpus import BASE, K_ALL
from tests.search.searchref import Row, apply_events, load_rows, passes, searchable

pytestmark = pytest.mark.stack


@pytest.mark.parametrize("query", ["harbor", "cargo vessel", "Rotterdam terminal contract",
                                   "customs tariff tariffs", "audit"])
def test_bm25_equals_an_independent_computation(
        corpus: dict[str, Any], aio: asyncio.Runner, tv: TantivySearcher,
        pg_searcher: PgPartSearcher, query: str) -> None:
    rows: dict[uuid.UUID, Row] = corpus["rows"]
    ns = corpus["a"]
    lexemes = aio.run(pg_searcher.query_lexemes(query))
    reference = tantivy_bm25(rows, ns, lexemes, Filters(), [])
    hits = aio.run(tv.search_lexical(ns, query, Filters(), [], K_ALL))
    assert len(hits) == len(reference) > 1
    for hit in hits:
        assert hit.score == pytest.approx(reference[hit.id], rel=1e-5)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert len(set(round(s, 4) for s in scores)) > 1
    assert aio.run(tv.search_lexical(ns, query, Filters(), [], 3)) == hits[:3]
    # the SQL channel finds the same rows (its k1/b differ, so only the set is compared)
    sql_hits = aio.run(pg_searcher.search_lexical(ns, query, Filters(), [], K_ALL))
    assert {h.id for h in sql_hits} == {h.id for h in hits}


def _filter_cases(corpus: dict[str, Any]) -> list[tuple[Filters, list[uuid.UUID]]]:
    rows: dict[uuid.UUID, Row] = corpus["rows"]
    promoted = searchable(rows, corpus["a"])
    some_root = sorted({p.id for p in promoted.values()})[3]
    some_row = sorted(promoted)[5]
    return [
        (Filters(kinds=("deal",)), []),
        (Filters(kinds=("deal", "note")), []),
        (Filters(title="ROTTERDAM port"), []),
        (Filters(title="deal 1"), []),
        (Filters(title="100%_"), []),
        (Filters(created_after=BASE + timedelta(days=10)), []),
        (Filters(created_after=BASE + timedelta(days=10),
                 created_before=BASE + timedelta(days=20)), []),
        # a bound exactly on a stored time: after is inclusive, before exclusive
        (Filters(updated_before=BASE + timedelta(days=30)), []),
        (Filters(updated_after=BASE + timedelta(days=30)), []),
        (Filters(properties=(("stage", ("won",)),)), []),
        (Filters(properties=(("stage", ("won", "lost")), ("flag", (True,)))), []),
        (Filters(properties=(("tags", ("red",)),)), []),
        (Filters(properties=(("amount", (20,)),)), []),
        (Filters(properties=(("amount", (20.0,)),)), []),
        (Filters(properties=(("amount", ("20",)),)), []),
        (Filters(properties=(("code", ("AB-3",)),)), []),
        (Filters(properties=(("stage", ()),)), []),
        (Filters(properties=(("missing", ("x",)),)), []),
        (Filters(), [some_root]),
        (Filters(), [some_row]),
        (Filters(kinds=("note",)), [some_root, some_row]),
    ]


def test_filters_and_scope_mean_what_the_sql_channel_means(
        corpus: dict[str, Any], aio: asyncio.Runner, tv: TantivySearcher,
        pg_searcher: PgPartSearcher) -> None:
    rows: dict[uuid.UUID, Row] = corpus["rows"]
    ns = corpus["a"]
    query = "harbor cargo contract audit customs rotterdam freight pricing"
    lexemes = aio.run(pg_searcher.query_lexemes(query))
    everything = tantivy_bm25(rows, ns, lexemes, Filters(), [])
    nonempty = 0
    promoted = searchable(rows, ns)
    for filters, scope in _filter_cases(corpus):
        hits = aio.run(tv.search_lexical(ns, query, filters, scope, K_ALL))
        expected = {i for i in everything if passes(i, promoted[i], filters, scope)}
        assert {h.id for h in hits} == expected, (filters, scope)
        # filters narrow the candidates, never the statistics
        for hit in hits:
            assert hit.score == pytest.approx(everything[hit.id], rel=1e-5)
        nonempty += bool(expected)
    assert nonempty >= 15  # the cases select something, and differently


def test_a_bad_property_name_is_refused_like_sql(
        corpus: dict[str, Any], aio: asyncio.Runner, tv: TantivySearcher) -> None:
    bad = Filters(properties=(("a.b", ("x",)),))
    with pytest.raises(InvalidFilter) as err:
        aio.run(tv.search_lexical(corpus["a"], "harbor", bad, [], 10))
    assert err.value.field == "a.b"


def test_each_namespace_is_its_own_index(
        corpus: dict[str, Any], aio: asyncio.Runner, tv: TantivySearcher,
        lex_settings: Any) -> None:
    a, b = corpus["a"], corpus["b"]
    assert aio.run(tv.search_lexical(b, "zebracorn", Filters(), [], 10))
    assert aio.run(tv.search_lexical(a, "zebracorn", Filters(), [], 10)) == []
    assert aio.run(tv.search_lexical(uuid.uuid4(), "harbor", Filters(), [], 10)) == []
    # b's extra row changes b's statistics only: a's scores stay its own
    rows: dict[uuid.UUID, Row] = corpus["rows"]
    ids_a = {h.id for h in aio.run(tv.search_lexical(a, "harbor", Filters(), [], K_ALL))}
    assert all(rows[i].namespace_id == a for i in ids_a)


def test_near_spellings_by_fuzzy_terms(
        corpus: dict[str, Any], aio: asyncio.Runner, tv: TantivySearcher) -> None:
    rows: dict[uuid.UUID, Row] = corpus["rows"]
    ns = corpus["a"]
    hits = aio.run(tv.search_fuzzy(ns, "warehuose", Filters(), [], K_ALL))  # a transposition
    exact = aio.run(tv.search_lexical(ns, "warehouse", Filters(), [], K_ALL))
    assert hits and {h.id for h in hits} == {h.id for h in exact}
    assert all(rows[h.id].namespace_id == ns for h in hits)
    # known words are the BM25 channel's; short words are not near-matched
    assert aio.run(tv.search_fuzzy(ns, "warehouse", Filters(), [], 10)) == []
    assert aio.run(tv.search_fuzzy(ns, "crn", Filters(), [], 10)) == []
    narrowed = aio.run(tv.search_fuzzy(ns, "warehuose", Filters(kinds=("deal",)), [], K_ALL))
    assert {h.id for h in narrowed} < {h.id for h in hits}
    # rows tied across the cut (a constant score per near word) are the ones with the least
    # ids, whichever way the engine takes them in: every k is a prefix of the whole answer
    for query in ("warehuose", "warehuose contrcat"):
        whole = aio.run(tv.search_fuzzy(ns, query, Filters(), [], K_ALL))
        assert len(whole) > 3
        for k in range(1, len(whole) + 1):
            assert aio.run(tv.search_fuzzy(ns, query, Filters(), [], k)) == whole[:k]


def test_the_writer_follows_puts_edits_and_deletes(
        corpus: dict[str, Any], aio: asyncio.Runner, tv: TantivySearcher,
        db: psycopg.Connection[Any], writer: LexicalWriter) -> None:
    ns = corpus["a"]
    event = put(ns, kind="note", title="Quokka memo", content="the quokka census")
    apply_events(db, [event])
    root = uuid.UUID(event["data"]["id"])
    assert writer.pending() >= 1  # queued by the write itself
    assert aio.run(tv.search_lexical(ns, "quokka", Filters(), [], 10)) == []
    writer.run()
    assert writer.pending() == 0
    hits = aio.run(_eventually(tv, ns, "quokka", lambda h: len(h) == 1))
    assert load_rows(db)[hits[0].id].parent_id == root  # its content's part
    # an edit replaces the document (the old words leave, the new arrive)
    apply_events(db, [put(ns, kind="note", title="Wombat memo", content="a wombat census",
                          id=str(root))])
    writer.run()
    aio.run(_eventually(tv, ns, "wombat", lambda h: len(h) == 1))
    aio.run(_eventually(tv, ns, "quokka", lambda h: h == []))
    # a soft delete removes it; applying the same queue row twice changes nothing
    apply_events(db, [envelope("object.soft_delete", ns, {"id": str(root)})])
    changes.enqueue_roots(db, ns, [root])
    writer.run()
    aio.run(_eventually(tv, ns, "wombat", lambda h: h == []))
    rows = load_rows(db)
    assert rows[root].deleted


async def _eventually(tv: TantivySearcher, ns: uuid.UUID, query: str, ok: Any,
                      attempts: int = 100) -> list[Any]:
    """The hits once `ok(hits)` holds (the reader reloads on commit, polling); bounded."""
    hits: list[Any] = []
    for _ in range(attempts):
        hits = await tv.search_lexical(ns, query, Filters(), [], 10)
        if ok(hits):
            return hits
        await asyncio.sleep(0.05)
    raise AssertionError(f"{query!r} never reached the expected hits: {hits}")
