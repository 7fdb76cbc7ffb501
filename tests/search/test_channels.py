"""The search channels on the real database: tenancy, soft deletes and filter semantics.

Two namespaces hold the same titles, contents and properties (different ids); each also has
soft-deleted objects. Whatever a channel returns for one namespace must be a searchable row of
that namespace that passes the filters (a generated `where` among them: it never widens the
namespace), and the exhaustive channels must return all of them.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pipeline.domain.conditions import Condition
from pipeline.domain.errors import InvalidFilter, InvalidInput
from pipeline.domain.read_model import Filters, Scalar
from pipeline.retrieval.requests import parse_where
from pipeline.retrieval.store.search import PgPartSearcher
from tests.search.corpus import BASE, K_ALL, KINDS, WORDS, hit_ids as _ids, run as _run
from tests.search.searchref import Row, bm25_reference, passes, searchable

pytestmark = pytest.mark.stack

# -- tenancy and soft deletes -------------------------------------------------------------------


def _where(raw: dict[str, Any]) -> Condition | None:
    try:
        return parse_where(raw)
    except InvalidInput:
        return None


_WHERE_LEAF = st.builds(
    lambda path, op, value: {"jsonpath": path, op: value},
    st.sampled_from(["$.stage", "$.tags", "$.amount", "$.flag", "$.code", "$.missing"]),
    st.sampled_from(["eq", "ne", "gt", "gte", "lt", "lte", "exists"]),
    st.sampled_from(["won", "open", "red", "AB", "b", 10, 20, 25.5, True]))
where_st = st.none() | st.recursive(_WHERE_LEAF, lambda inner: st.one_of(
    st.builds(lambda ms: {"and": ms}, st.lists(inner, min_size=1, max_size=3)),
    st.builds(lambda ms: {"or": ms}, st.lists(inner, min_size=1, max_size=3)),
    st.builds(lambda m: {"not": m}, inner)), max_leaves=4).map(_where)

filters_st = st.builds(
    Filters,
    kinds=st.lists(st.sampled_from(KINDS), max_size=2, unique=True).map(tuple),
    title=st.none() | st.sampled_from(["port", "AUDIT", "42", "review 1", "nothing like it"]),
    created_after=st.none() | st.integers(0, 60).map(lambda d: BASE + timedelta(days=d)),
    created_before=st.none() | st.integers(0, 60).map(lambda d: BASE + timedelta(days=d)),
    updated_after=st.none() | st.integers(0, 120).map(lambda d: BASE + timedelta(days=d)),
    properties=st.lists(st.tuples(
        st.sampled_from(["stage", "tags", "amount", "flag", "code", "missing"]),
        st.lists(st.sampled_from(["won", "open", "red", "blue", 10, 30, True, "AB-3", "x"]),
                 min_size=1, max_size=2).map(tuple)), max_size=2, unique_by=lambda p: p[0]
    ).map(tuple),
    where=where_st,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(filters=filters_st, query=st.lists(st.sampled_from([*WORDS, "Rotterdam", "zebracorn"]),
                                          min_size=1, max_size=3).map(" ".join),
       scope_n=st.integers(0, 6), scope_seed=st.integers(0, 1000))
def test_channels_stay_in_namespace_and_honor_filters(
        corpus: dict[str, Any], aio: asyncio.Runner, searcher: PgPartSearcher,
        filters: Filters, query: str, scope_n: int, scope_seed: int) -> None:
    rows: dict[uuid.UUID, Row] = corpus["rows"]
    ns = corpus["a"]
    allowed = searchable(rows, ns)
    # scope may name rows of either namespace: it must never widen
    scope = random.Random(scope_seed).sample(sorted(rows), scope_n) if scope_n else []
    expected = {i for i, p in allowed.items() if passes(i, p, filters, scope)}
    lexemes = _run(aio, searcher.query_lexemes(query))
    results = {
        "lexical": _run(aio, searcher.search_lexical(ns, query, filters, scope, K_ALL)),
        "trigram": _run(aio, searcher.search_trigram(ns, query, filters, scope, K_ALL)),
        "dense": _run(aio, searcher.search_dense(ns, [1.0] * 256, filters, scope, K_ALL)),
        "exact": _run(aio, searcher.exact_matches(ns, query, filters, scope, K_ALL)),
    }
    for name, hits in results.items():
        assert set(_ids(hits)) <= expected, name
        assert len(set(_ids(hits))) == len(hits), name
    # completeness: every embedded row that passes comes back, and exactly the lexical matches
    assert set(_ids(results["dense"])) == expected
    reference = bm25_reference(rows, ns, lexemes, filters, scope)
    assert set(_ids(results["lexical"])) == set(reference)


def test_other_namespace_and_deleted_rows_never_returned(
        corpus: dict[str, Any], aio: asyncio.Runner, searcher: PgPartSearcher) -> None:
    rows: dict[uuid.UUID, Row] = corpus["rows"]
    ns = corpus["a"]
    none = Filters()
    assert _run(aio, searcher.search_lexical(ns, "zebracorn", none, [], 10)) == []
    assert _run(aio, searcher.search_trigram(ns, "zebracorn", none, [], 10)) == []
    assert _run(aio, searcher.exact_matches(ns, "Only in B", none, [], 10)) == []
    only_b = next(r for r in rows.values() if r.title == "Only in B")
    assert _run(aio, searcher.exact_matches(ns, str(only_b.id), none, [], 10)) == []
    assert _run(aio, searcher.row_meta(ns, [only_b.id])) == {}
    # the other namespace finds its own copy
    own = [i for i, p in searchable(rows, corpus["b"]).items() if p.id == only_b.id]
    assert _ids(_run(aio, searcher.exact_matches(corpus["b"], "Only in B", none, [], 10))) == own
    # soft-deleted objects (and the parts of a deleted parent) are gone from every channel
    deleted = [r for r in rows.values() if r.namespace_id == ns and r.deleted]
    assert deleted and any(r.parent_id is not None for r in deleted)
    for row in deleted:
        assert _run(aio, searcher.exact_matches(ns, str(row.id), none, [], 10)) == []
        if row.title:
            hits = _run(aio, searcher.exact_matches(ns, row.title, none, [], 10))
            assert not {h.id for h in hits} & {r.id for r in deleted}
    everything = _run(aio, searcher.search_dense(ns, [1.0] * 256, none, [], K_ALL))
    assert set(_ids(everything)) == set(searchable(rows, ns))
    # a parent with visible parts is represented by its parts, never itself
    parents = {r.parent_id for r in rows.values() if r.parent_id and not r.deleted}
    assert not parents & set(_ids(everything))


# -- filters -------------------------------------------------------------------------------------


def test_property_filter_eq_in_and_list_values(
        corpus: dict[str, Any], aio: asyncio.Runner, searcher: PgPartSearcher) -> None:
    rows: dict[uuid.UUID, Row] = corpus["rows"]
    ns = corpus["a"]
    allowed = searchable(rows, ns)
    cases: list[tuple[str, tuple[Scalar, ...]]] = [
        ("stage", ("won",)), ("stage", ("won", "lost")), ("tags", ("red",)),
        ("tags", ("red", "blue")), ("amount", (20,)), ("flag", (True,)), ("flag", (1,))]
    for name, values in cases:
        filters = Filters(properties=((name, values),))
        got = {h.id for h in _run(aio, searcher.search_dense(ns, [1.0] * 256, filters, [],
                                                              K_ALL))}
        want = {i for i, p in allowed.items() if passes(i, p, filters, [])}
        assert got == want, (name, values)
        if name != "flag" or values != (1,):
            assert want, (name, values)  # the case is not vacuous
    assert _run(aio, searcher.search_dense(
        ns, [1.0] * 256, Filters(properties=(("flag", (1,)),)), [], K_ALL)) == []


def test_each_filter_alone_including_range_boundaries(
        corpus: dict[str, Any], aio: asyncio.Runner, searcher: PgPartSearcher) -> None:
    rows: dict[uuid.UUID, Row] = corpus["rows"]
    ns = corpus["a"]
    allowed = searchable(rows, ns)
    pivot = sorted({p.id: p for p in allowed.values()}.values(), key=lambda p: p.created_at)[5]
    cases = [Filters(kinds=("deal",)), Filters(kinds=("note", "company")),
             Filters(title="PORT deal"), Filters(title="100%"), Filters(title="_"),
             Filters(created_after=pivot.created_at), Filters(created_before=pivot.created_at),
             Filters(updated_after=pivot.updated_at), Filters(updated_before=pivot.updated_at),
             Filters(created_after=pivot.created_at, created_before=pivot.created_at)]
    for filters in cases:
        got = {h.id for h in _run(aio, searcher.search_dense(ns, [1.0] * 256, filters, [],
                                                              K_ALL))}
        assert got == {i for i, p in allowed.items() if passes(i, p, filters, [])}, filters
    after = _run(aio, searcher.search_dense(ns, [1.0] * 256, cases[5], [], K_ALL))
    before = _run(aio, searcher.search_dense(ns, [1.0] * 256, cases[6], [], K_ALL))
    assert any(allowed[h.id].id == pivot.id for h in after)  # `after` includes its bound
    assert not any(allowed[h.id].id == pivot.id for h in before)  # `before` excludes it
    assert len(after) + len(before) == len(allowed)


@pytest.mark.parametrize("name", ["a-b", "1abc", "x'); DROP TABLE objects; --", "", "é",
                                  "a" * 64, "stage\n"])
def test_bad_property_names_are_refused(corpus: dict[str, Any], aio: asyncio.Runner,
                                        searcher: PgPartSearcher, name: str) -> None:
    filters = Filters(properties=((name, ("x",)),))
    for call in (searcher.search_lexical, searcher.search_trigram, searcher.exact_matches):
        with pytest.raises(InvalidFilter) as info:
            _run(aio, call(corpus["a"], "harbor", filters, [], 5))
        assert info.value.field == name


def test_scope_admits_row_or_promoted_object(
        corpus: dict[str, Any], aio: asyncio.Runner, searcher: PgPartSearcher) -> None:
    rows: dict[uuid.UUID, Row] = corpus["rows"]
    ns = corpus["a"]
    allowed = searchable(rows, ns)
    part = next(i for i, p in allowed.items() if p.id != i)
    parent = allowed[part].id
    by_parent = _run(aio, searcher.search_dense(ns, [1.0] * 256, Filters(), [parent], K_ALL))
    assert {h.id for h in by_parent} == {i for i, p in allowed.items() if p.id == parent}
    by_part = _run(aio, searcher.search_dense(ns, [1.0] * 256, Filters(), [part], K_ALL))
    assert _ids(by_part) == [part]
