"""Facet counts on the Tantivy index (LEXICAL_ENGINE=tantivy), exact and in Tantivy's columns.

Each object has one lead document (`documents.LEAD`) holding every lexeme of its rows
(`documents.ROOT_TEXT`). The match set's objects are then the leads that hold a query lexeme or
belong to a fused candidate (`ROOT_ID`), under the filters; one aggregation over them counts
objects, never parts: terms (kind, a property's values), histograms (a numeric property), and
day histograms of created_at / updated_at folded into weeks, months or years here. A date
property's buckets, a request with `scope_ids` (which may name parts), an index with an older
schema, or a property with more distinct values than an aggregation may bucket are left to the
SQL store (`None` for that facet).

Sorting by created_at, updated_at or a numeric property takes the first leads in that order
the same way (Tantivy's fast-field order, or a `top_hits` aggregation for a property); the SQL
store sorts whatever this cannot order exactly: title and position, other property types, a
property whose present values are not all numbers, ties across the cut, scoped requests.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import tantivy

from pipeline.domain.match_set import FacetCounts, FacetPlan, SortPlan
from pipeline.domain.read_model import Filters
from pipeline.lexical.documents import (
    CREATED,
    KIND,
    PROPERTIES,
    ROOT_HI,
    ROOT_ID,
    ROOT_LO,
    ROOT_TEXT,
    SCHEMA,
    UPDATED,
    id_from_halves,
)
from pipeline.lexical.queries import filter_clauses, lead_documents
from pipeline.lexical.searcher import TantivySearcher, run_tantivy

# Terms buckets asked per facet: every distinct value (Tantivy refuses an aggregation past
# 65,000 buckets; such a facet goes to SQL).
_ALL_TERMS = 60_000
_DAY_US = 86_400_000_000
# How far a sort widens its fetch to take in a tie across the cut (x the limit), before it
# leaves the order to SQL.
_MAX_TIE_FETCH = 8
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class TantivyFacets:
    """Facet counts over the leads of one index generation (`searcher`'s indexes)."""

    def __init__(self, searcher: TantivySearcher) -> None:
        self.searcher = searcher

    async def facets(self, namespace: uuid.UUID, query: str, filters: Filters,
                     scope_ids: Sequence[uuid.UUID], candidates: Sequence[uuid.UUID],
                     plans: Sequence[FacetPlan]) -> list[FacetCounts | None]:
        """Per plan its counts, or None where the SQL store must count."""
        if scope_ids or not any(_supported(p) for p in plans):
            return [None] * len(plans)
        lexemes = await self.searcher.lexemes(query)
        return await run_tantivy(self._facets, namespace, lexemes, filters, candidates,
                                       plans)

    def _facets(self, namespace: uuid.UUID, lexemes: Sequence[str], filters: Filters,
                candidates: Sequence[uuid.UUID],
                plans: Sequence[FacetPlan]) -> list[FacetCounts | None]:
        index = self.searcher.current_index(namespace)
        if index is None:
            return [None] * len(plans)
        query = _leads(lexemes, filters, candidates)
        searcher = index.searcher()
        out: list[FacetCounts | None] = []
        for plan in plans:
            agg = _aggregation(plan)
            if agg is None:
                out.append(None)
                continue
            try:
                found = searcher.aggregate(query, {"f": agg})
            except ValueError:  # too many buckets: SQL counts this one
                out.append(None)
                continue
            out.append(_counts(plan, found["f"]))
        return out


    async def sorted_ids(self, namespace: uuid.UUID, query: str, filters: Filters,
                         scope_ids: Sequence[uuid.UUID], ranked: Sequence[uuid.UUID],
                         plan: SortPlan, limit: int) -> list[uuid.UUID] | None:
        """The match set's first `limit` objects in the plan's order (ties by rank in
        `ranked`, then id), or None where the SQL store must sort."""
        if scope_ids or not _sortable(plan):
            return None
        lexemes = await self.searcher.lexemes(query)
        return await run_tantivy(self._sorted, namespace, lexemes, filters, ranked,
                                       plan, limit)

    def _sorted(self, namespace: uuid.UUID, lexemes: Sequence[str], filters: Filters,
                ranked: Sequence[uuid.UUID], plan: SortPlan,
                limit: int) -> list[uuid.UUID] | None:
        index = self.searcher.current_index(namespace)
        if index is None:
            return None
        searcher = index.searcher()
        base = _leads(lexemes, filters, ranked)
        if plan.source in ("created_at", "updated_at"):
            field = CREATED if plan.source == "created_at" else UPDATED
            order = tantivy.Order.Desc if plan.descending else tantivy.Order.Asc

            def fetch(size: int) -> list[tuple[int, uuid.UUID]]:
                hits = searcher.search(base, size, count=False, order_by_field=field,
                                       order=order).hits
                addresses = [address for _, address in hits]
                his = searcher.fast_field_values(ROOT_HI, addresses)
                los = searcher.fast_field_values(ROOT_LO, addresses)
                return [(int(key), id_from_halves(int(h or 0), int(lo or 0)))
                        for (key, _), h, lo in zip(hits, his, los, strict=True)]
            def missing() -> int:
                return 0
        else:
            path = f"{PROPERTIES}.{plan.name}"
            exists = _and(base, tantivy.Query.exists_query(path))

            def top(size: int) -> dict[str, Any]:
                return {"top_hits": {"sort": [{path: "desc" if plan.descending else "asc"}],
                                     "size": size, "docvalue_fields": [ROOT_HI, ROOT_LO]}}

            def hits(found: dict[str, Any]) -> list[tuple[int, uuid.UUID]]:
                return [(int(h["sort"][0]), id_from_halves(int(h["docvalue_fields"][ROOT_HI][0]),
                                                           int(h["docvalue_fields"][ROOT_LO][0])))
                        for h in found["t"]["hits"]]

            # one pass over the objects holding the value: its types, their number (one
            # ROOT_HI per document) and the first `limit + 1` in order
            first = searcher.aggregate(exists, {"all": {"value_count": {"field": path}},
                                                "numbers": {"stats": {"field": path}},
                                                "docs": {"value_count": {"field": ROOT_HI}},
                                                "t": top(limit + 1)})
            if int(first["all"]["value"] or 0) != int(first["numbers"]["count"] or 0):
                return None  # strings or booleans too: SQL orders the types
            holding = int(first["docs"]["value"] or 0)

            def missing() -> int:
                """Objects of the match set without the value (counted only when needed)."""
                return _count(searcher, base) - holding

            def fetch(size: int) -> list[tuple[int, uuid.UUID]]:
                found = first if size == limit + 1 else searcher.aggregate(exists,
                                                                           {"t": top(size)})
                return hits(found)
        # ties straddling the cut are all fetched (the size doubles), then ordered by relevance
        size = limit + 1
        present = fetch(size)
        while len(present) == size and present[-1][0] == present[limit - 1][0]:
            if size >= _MAX_TIE_FETCH * limit:
                return None  # a huge tie: SQL orders it
            size *= 2
            present = fetch(size)
        rank = {oid: i for i, oid in enumerate(ranked)}
        far = len(ranked)
        sign = -1 if plan.descending else 1
        # ties by rank, then id (a UUID's integer orders as its text does)
        ordered = sorted(present, key=lambda p: (sign * p[0], rank.get(p[1], far), p[1].int))
        out = [oid for _, oid in ordered[:limit]]
        if len(out) < limit and missing() > 0:
            return None  # objects without the value follow: SQL orders them
        return out


def _count(searcher: tantivy.Searcher, query: tantivy.Query) -> int:
    found: Any = searcher.search(query, 1, count=True)  # `count` is missing from the stubs
    return int(found.count)


def _and(base: tantivy.Query, clause: tantivy.Query) -> tantivy.Query:
    return tantivy.Query.boolean_query([(tantivy.Occur.Must, base),
                                        (tantivy.Occur.Must, clause)])


def _leads(lexemes: Sequence[str], filters: Filters,
           candidates: Sequence[uuid.UUID]) -> tantivy.Query:
    """The match set's leads: those holding a lexeme or of a candidate, under the filters."""
    matches = [tantivy.Query.term_set_query(SCHEMA, ROOT_TEXT, list(lexemes)),
               tantivy.Query.term_set_query(SCHEMA, ROOT_ID, [str(c) for c in candidates])]
    return tantivy.Query.boolean_query(
        [(tantivy.Occur.Must, lead_documents()),
         (tantivy.Occur.Must, tantivy.Query.boolean_query(
             [(tantivy.Occur.Should, m) for m in matches]))]
        + [(tantivy.Occur.Must, c) for c in filter_clauses(filters, ())])


def _sortable(plan: SortPlan) -> bool:
    return plan.source in ("created_at", "updated_at") or (
        plan.source == "property" and plan.key_type in ("number", "any"))


def _supported(plan: FacetPlan) -> bool:
    return _aggregation(plan) is not None


def _aggregation(plan: FacetPlan) -> dict[str, Any] | None:
    if plan.source == "kind":
        return {"terms": {"field": KIND, "size": _ALL_TERMS, "segment_size": _ALL_TERMS}}
    if plan.source in ("created_at", "updated_at"):
        field = CREATED if plan.source == "created_at" else UPDATED
        return {"histogram": {"field": field, "interval": _DAY_US, "min_doc_count": 1}}
    path = f"{PROPERTIES}.{plan.name}"
    if plan.type == "terms":
        return {"terms": {"field": path, "size": _ALL_TERMS, "segment_size": _ALL_TERMS}}
    if plan.type == "number":
        return {"histogram": {"field": path, "interval": plan.width, "min_doc_count": 1}}
    return None  # a date property: its strings are compared as instants in SQL


def _value(key: object) -> object:
    if isinstance(key, float) and key.is_integer() and abs(key) < 2**53:
        return int(key)
    return key


def _order(value: object) -> tuple[int, object]:
    # as Postgres orders jsonb scalars: strings, then numbers, then booleans
    if isinstance(value, bool):
        return 2, value
    if isinstance(value, int | float):
        return 1, value
    return 0, str(value)


def _counts(plan: FacetPlan, result: dict[str, Any]) -> FacetCounts:
    buckets = [(_value(b["key"]), int(b["doc_count"])) for b in result.get("buckets", [])
               if int(b["doc_count"]) > 0]
    total = sum(n for _, n in buckets) + int(result.get("sum_other_doc_count") or 0)
    if plan.source in ("created_at", "updated_at"):
        folded: Counter[str] = Counter()
        for day, n in buckets:
            start = _EPOCH + timedelta(microseconds=int(day))  # type: ignore[call-overload]
            folded[_truncate(start, str(plan.unit)).isoformat(timespec="seconds")] += n
        values: list[tuple[object, int]] = sorted(folded.items())
    elif plan.type == "terms":
        values = sorted(buckets, key=lambda b: (-b[1], _order(b[0])))
    else:
        values = sorted(buckets, key=lambda b: float(b[0]))  # type: ignore[arg-type]
    return FacetCounts(values[: plan.size], total)


def _truncate(when: datetime, unit: str) -> datetime:
    day = when.replace(hour=0, minute=0, second=0, microsecond=0, tzinfo=None)
    if unit == "week":
        return day - timedelta(days=day.weekday())
    if unit == "month":
        return day.replace(day=1)
    if unit == "year":
        return day.replace(month=1, day=1)
    return day
