"""Facets and sorting in the retrieval engine: the hook between the ranked items and the pager.

The engine ranks as always; when a request asks facets or a sort, `MatchSetStage.apply` asks the
store (`MatchSetReader`) over the match set (`pipeline/domain/match_set.py`) with the ranked
objects as its candidates, and returns the facets as the answer shows them and, for a sort, the
items re-ordered: the match set's first `max_items` objects in the sort's order, ties by
relevance then id. An object the sort brings in that the channels did not rank has score 0 and
no evidence. The pager stores that list as the result set, so `continue` pages through it.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pipeline.domain.match_set import FacetCounts, FacetPlan, SortPlan
from pipeline.domain.read_model import SearchQuery
from pipeline.ports import MatchSetReader
from pipeline.retrieval.paging import Item


@dataclass(frozen=True)
class Shape:
    """A request's facets and sort, validated (`RetrievalEngine.shape`)."""

    request: SearchQuery
    facets: list[FacetPlan]
    sort: SortPlan | None


class MatchSetStage:
    """Facets and sorted orders over a search's match set (at most `max_items` sorted)."""

    def __init__(self, reader: MatchSetReader, *, max_items: int = 1000) -> None:
        self.reader = reader
        self.max_items = max_items

    async def apply(self, namespace: uuid.UUID, query: str, request: SearchQuery,
                    items: list[Item], candidates: Sequence[uuid.UUID],
                    facets: Sequence[FacetPlan], sort: SortPlan | None
                    ) -> tuple[list[Item], dict[str, object] | None, bool]:
        """The items (re-ordered by `sort`), the facets (None when none were asked) and
        whether the sort cut the match set at `max_items`. `items` are the ranked objects in
        relevance order; `candidates` every fused object (the page's items first)."""
        counted, ordered = await asyncio.gather(
            self.reader.facets(namespace, query, request.filters, request.scope_ids,
                               candidates, facets) if facets else _none(),
            self.reader.sorted_ids(namespace, query, request.filters, request.scope_ids,
                                   candidates, sort, self.max_items + 1)
            if sort is not None else _none())
        shown: dict[str, object] | None = None if not facets else {
            plan.key: facet_answer(plan, counts)
            for plan, counts in zip(facets, counted or [], strict=True)}
        if ordered is None:
            return items, shown, False
        by_id = {uuid.UUID(str(item["id"])): item for item in items}
        out = [by_id.get(oid) or {"id": str(oid), "score": 0.0, "evidence": []}
               for oid in ordered[: self.max_items]]
        return out, shown, len(ordered) > self.max_items


async def _none() -> None:
    return None


def facet_answer(plan: FacetPlan, counts: FacetCounts) -> dict[str, object]:
    """One facet as the answer shows it: `buckets` and `other` (the sum of the counts of the
    values or buckets beyond `size`)."""
    kept = 0
    buckets: list[dict[str, object]] = []
    for value, n in counts.values:
        if plan.type == "terms":
            buckets.append({"value": value, "count": n})
        elif plan.type == "number":
            try:
                start = float(value)  # type: ignore[arg-type]
            except OverflowError:
                continue  # beyond a float (a JSON answer holds none): counted in `other`
            end = start + float(plan.width or 1.0)
            if not math.isfinite(end):
                continue
            buckets.append({"from": _number(start), "to": _number(end), "count": n})
        else:
            begin = datetime.fromisoformat(str(value))
            buckets.append({"from": _iso(begin), "to": _iso(_next(begin, str(plan.unit))),
                            "count": n})
        kept += n
    return {"buckets": buckets, "other": counts.total - kept}


def _number(value: float) -> int | float:
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def _iso(value: datetime) -> str:
    return value.replace(microsecond=0).isoformat() + "Z"  # four-digit years, always


def _next(begin: datetime, unit: str) -> datetime:
    """The start of the bucket after the one starting at `begin` (UTC)."""
    if unit == "day":
        return begin + timedelta(days=1)
    if unit == "week":
        return begin + timedelta(days=7)
    try:
        if unit == "month":
            return begin.replace(year=begin.year + begin.month // 12,
                                 month=begin.month % 12 + 1)
        return begin.replace(year=begin.year + 1)
    except ValueError:  # past year 9999
        return datetime.max.replace(microsecond=0)
