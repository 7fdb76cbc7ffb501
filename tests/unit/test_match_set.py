"""Facet and sort plans against the kind catalog, and facet answers (no database)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from hypothesis import example, given, strategies as st

from pipeline.domain.errors import InvalidInput
from pipeline.domain.kinds import FieldSpec, KindCatalog, KindSpec
from pipeline.domain.match_set import (
    MAX_FACETS,
    FacetCounts,
    FacetPlan,
    plan_facets,
    plan_sort,
)
from pipeline.domain.read_model import FacetSpec, SortSpec
from pipeline.lexical.facets import _counts as index_counts
from pipeline.retrieval.matchset import facet_answer
from pipeline.retrieval.store.matchset import tsquery_text

CATALOG = KindCatalog([
    KindSpec("deal", fields=(FieldSpec("stage", "string"), FieldSpec("amount", "number"),
                             FieldSpec("close", "datetime"))),
    KindSpec("company", fields=(FieldSpec("public", "boolean"),)),
])
OPEN = KindCatalog([])


def _refused(call: object) -> str:
    with pytest.raises(InvalidInput) as caught:
        call()  # type: ignore[operator]
    assert caught.value.field is not None
    return caught.value.field


def test_facet_plans_follow_the_catalogs_types() -> None:
    plans = plan_facets([FacetSpec("kind"), FacetSpec("$.stage", size=3),
                         FacetSpec("$.amount", interval=100), FacetSpec("$.close", interval="week"),
                         FacetSpec("updated_at", interval="day")], CATALOG)
    assert [(p.source, p.type, p.name) for p in plans] == [
        ("kind", "terms", None), ("property", "terms", "stage"),
        ("property", "number", "amount"), ("property", "date", "close"),
        ("updated_at", "date", None)]
    assert plans[2].width == 100.0 and plans[3].unit == "week"
    # open mode: any property, any interval
    assert plan_facets([FacetSpec("$.anything", interval="year")], OPEN)[0].type == "date"


@pytest.mark.parametrize(("facets", "kinds", "field"), [
    ([FacetSpec("$.nope")], (), "facets[0].field"),
    ([FacetSpec("$.stage")], ("company",), "facets[0].field"),  # company does not declare it
    ([FacetSpec("$bad")], (), "facets[0].field"),
    ([FacetSpec("$.stage", interval=5)], (), "facets[0].interval"),
    ([FacetSpec("$.amount", interval="month")], (), "facets[0].interval"),
    ([FacetSpec("$.amount", interval=0)], (), "facets[0].interval"),
    ([FacetSpec("$.amount", interval=1e-300)], (), "facets[0].interval"),
    ([FacetSpec("kind", interval="day")], (), "facets[0].interval"),
    ([FacetSpec("created_at")], (), "facets[0].interval"),
    ([FacetSpec("kind", size=0)], (), "facets[0].size"),
    ([FacetSpec("kind"), FacetSpec("kind")], (), "facets[1].field"),
    ([FacetSpec(f"$.p{i}") for i in range(MAX_FACETS + 1)], (), "facets"),
])
def test_bad_facets_name_their_field(facets: list[FacetSpec], kinds: tuple[str, ...],
                                     field: str) -> None:
    catalog = OPEN if field == "facets" else CATALOG
    assert _refused(lambda: plan_facets(facets, catalog, kinds)) == field


def test_sort_plans() -> None:
    assert plan_sort(None, CATALOG) is None
    assert plan_sort(SortSpec("relevance"), CATALOG) is None
    updated = plan_sort(SortSpec("updated_at"), CATALOG)
    assert updated is not None and updated.descending  # the times default to newest first
    title = plan_sort(SortSpec("title"), CATALOG)
    assert title is not None and not title.descending
    amount = plan_sort(SortSpec("$.amount", "desc"), CATALOG)
    assert amount is not None and (amount.name, amount.key_type) == ("amount", "number")
    anything = plan_sort(SortSpec("$.x"), OPEN)
    assert anything is not None and anything.key_type == "any"
    assert _refused(lambda: plan_sort(SortSpec("$.x"), CATALOG)) == "sort.field"
    assert _refused(lambda: plan_sort(SortSpec("relevance", "asc"), CATALOG)) == "sort.order"
    assert _refused(lambda: plan_sort(SortSpec("colour"), CATALOG)) == "sort.field"


def test_facet_answers() -> None:
    terms = FacetPlan("$.stage", "property", "terms", 2, name="stage")
    assert facet_answer(terms, FacetCounts([("won", 3), ("lost", 2)], 6)) == {
        "buckets": [{"value": "won", "count": 3}, {"value": "lost", "count": 2}], "other": 1}
    number = FacetPlan("$.amount", "property", "number", 10, name="amount", width=2.5)
    assert facet_answer(number, FacetCounts([(5, 1), (7.5, 2)], 3))["buckets"] == [
        {"from": 5, "to": 7.5, "count": 1}, {"from": 7.5, "to": 10, "count": 2}]
    huge = facet_answer(number, FacetCounts([(5, 1), (float("inf"), 2), (10**400, 4)], 7))
    assert huge == {"buckets": [{"from": 5, "to": 7.5, "count": 1}], "other": 6}
    month = FacetPlan("$.close", "property", "date", 10, name="close", unit="month")
    assert facet_answer(month, FacetCounts([("2024-12-01T00:00:00", 4)], 4)) == {
        "buckets": [{"from": "2024-12-01T00:00:00Z", "to": "2025-01-01T00:00:00Z",
                     "count": 4}], "other": 0}


@example(datetime(999, 12, 1), "month")
@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9998, 12, 31)),
       st.sampled_from(["day", "week", "month", "year"]))
def test_a_date_bucket_ends_after_it_starts(start: datetime, unit: str) -> None:
    start = start.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit in ("month", "year"):
        start = start.replace(day=1)
    if unit == "year":
        start = start.replace(month=1)
    plan = FacetPlan("updated_at", "updated_at", "date", 1, unit=unit)
    buckets: Any = facet_answer(plan, FacetCounts([(start.isoformat(), 1)], 1))["buckets"]
    assert buckets[0]["to"] > buckets[0]["from"]
    assert buckets[0]["from"] == start.isoformat() + "Z"


def test_tsquery_text_quotes_every_lexeme() -> None:
    assert tsquery_text([]) is None
    assert tsquery_text(["harbor", "o'neil", "a\\b", "&|!"]) == (
        "'harbor' | 'o''neil' | 'a\\\\b' | '&|!'")


def test_index_counts_fold_days_and_order_values_as_postgres_does() -> None:
    day = 86_400_000_000
    monday = 19_723  # 2024-01-01 in days since the epoch, a Monday
    weeks = FacetPlan("created_at", "created_at", "date", 10, unit="week")
    days = {"buckets": [{"key": float(d * day), "doc_count": n}
                        for d, n in ((monday, 1), (monday + 6, 2), (monday + 7, 4))]}
    assert index_counts(weeks, days) == FacetCounts(
        [("2024-01-01T00:00:00", 3), ("2024-01-08T00:00:00", 4)], 7)
    terms = FacetPlan("$.x", "property", "terms", 3, name="x")
    found = {"buckets": [{"key": 5.0, "doc_count": 2}, {"key": "b", "doc_count": 2},
                         {"key": "a", "doc_count": 1}, {"key": "c", "doc_count": 1}],
             "sum_other_doc_count": 0}
    # count desc, then strings before numbers (jsonb's order); a whole float is an integer
    assert index_counts(terms, found) == FacetCounts([("b", 2), (5, 2), ("a", 1)], 6)
