"""Facets and sorting of a search, validated into plans (pure: no I/O).

Both work over the search's *match set*: the objects (promoted objects: a part counts as its
parent, once) that pass the filters and scope and either hold at least one of the query's words
(their own text or one of their parts': the lexical channel's OR match), or are among the fused
candidates (so dense-only and near-spelling hits count too). The store answers over it
(`MatchSetReader`, `pipeline/retrieval/store/matchset.py`); the engine's hook is
`pipeline/retrieval/matchset.py`.

Fields: the built-ins `kind`, `created_at`, `updated_at` (and, for sorting, `title`,
`position`, `relevance`) by bare name; properties as `$.name`. With a kind catalog a property
must be declared (by one of the filtered kinds, when the filters name kinds), and a bucket
interval must fit its type; in open mode any property may be asked and values of another type
than the interval's are not counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pipeline.domain.errors import InvalidInput
from pipeline.domain.kinds import KindCatalog, is_valid_property_key
from pipeline.domain.read_model import DATE_INTERVALS, FacetSpec, SortSpec

# Per request: facets asked, and buckets one facet returns (its `size`). Each facet is one
# GROUP BY over the match set; a bucket list is what a sidebar can show.
MAX_FACETS = 8
MAX_FACET_SIZE = 100
DEFAULT_FACET_SIZE = 10
# A numeric interval's bounds: bucket starts stay finite numbers a JSON answer can carry.
MIN_INTERVAL = 1e-9
MAX_INTERVAL = 1e15

FacetType = Literal["terms", "number", "date"]
# How a sort key compares: as numbers, instants, text, booleans, or (open mode) each type in
# that order.
KeyType = Literal["number", "datetime", "string", "boolean", "any"]
BUILT_IN_FACETS = ("kind", "created_at", "updated_at")
BUILT_IN_SORTS = ("relevance", "updated_at", "created_at", "title", "position")
_DESC_BY_DEFAULT = ("relevance", "updated_at", "created_at")


@dataclass(frozen=True)
class FacetPlan:
    """A facet as the store computes it: `source` is a built-in column or `property` (its
    key in `name`); `type` says how values group."""

    key: str  # the answer's key: the field as the caller wrote it
    source: Literal["kind", "created_at", "updated_at", "property"]
    type: FacetType
    size: int
    name: str | None = None  # the property key
    width: float | None = None  # number buckets
    unit: str | None = None  # date buckets: day | week | month | year


@dataclass(frozen=True)
class SortPlan:
    """A sort as the store orders by it: a built-in column or a property (`name`, compared
    as `key_type`); missing values last in both orders."""

    source: Literal["updated_at", "created_at", "title", "position", "property"]
    descending: bool
    name: str | None = None
    key_type: KeyType = "any"


@dataclass
class FacetCounts:
    """A facet as the store counted it: the kept values (JSON values; bucket starts for
    intervals) with their object counts, and the sum of every value's count (kept or not)."""

    values: list[tuple[object, int]]
    total: int


def _property(field: str, where: str) -> str:
    name = field[2:]
    if not field.startswith("$.") or not is_valid_property_key(name):
        raise InvalidInput(f"{field!r} is neither a built-in field nor a property $.<name>",
                           field=where)
    return name


def _declared_type(catalog: KindCatalog, kinds: Sequence[str], name: str,
                   where: str) -> str | None:
    """The property's declared type (None in open mode); InvalidInput when no kind in scope
    declares it."""
    if catalog.is_open:
        return None
    specs = [s for s in catalog.specs if not kinds or s.kind in kinds]
    for spec in specs:
        declared = spec.field(name)
        if declared is not None:
            return declared.type
    scope = "any kind" if not kinds else "kinds " + ", ".join(kinds)
    raise InvalidInput(f"property {name!r} is not declared by {scope}", field=where)


def plan_facets(specs: Sequence[FacetSpec], catalog: KindCatalog,
                kinds: Sequence[str] = ()) -> list[FacetPlan]:
    """The facets validated against the catalog (InvalidInput naming `facets[i]...`)."""
    if len(specs) > MAX_FACETS:
        raise InvalidInput(f"{len(specs)} facets; at most {MAX_FACETS} are allowed",
                           field="facets")
    plans: list[FacetPlan] = []
    seen: set[str] = set()
    for i, spec in enumerate(specs):
        at = f"facets[{i}]"
        if spec.field in seen:
            raise InvalidInput(f"facet {spec.field!r} is asked twice", field=f"{at}.field")
        seen.add(spec.field)
        if not 1 <= spec.size <= MAX_FACET_SIZE:
            raise InvalidInput(f"size must be between 1 and {MAX_FACET_SIZE}",
                               field=f"{at}.size")
        plans.append(_plan_facet(spec, catalog, kinds, at))
    return plans


def _plan_facet(spec: FacetSpec, catalog: KindCatalog, kinds: Sequence[str],
                at: str) -> FacetPlan:
    interval = spec.interval
    if isinstance(interval, bool):
        raise InvalidInput("interval must be a number or day|week|month|year",
                           field=f"{at}.interval")
    is_date = isinstance(interval, str)
    if is_date and interval not in DATE_INTERVALS:
        raise InvalidInput(f"interval must be a number or one of {', '.join(DATE_INTERVALS)}",
                           field=f"{at}.interval")
    if isinstance(interval, int | float) and not MIN_INTERVAL <= interval <= MAX_INTERVAL:
        raise InvalidInput(f"a numeric interval must be between {MIN_INTERVAL:g} and"
                           f" {MAX_INTERVAL:g}", field=f"{at}.interval")
    if spec.field == "kind":
        if interval is not None:
            raise InvalidInput("kind takes no interval", field=f"{at}.interval")
        return FacetPlan(spec.field, "kind", "terms", spec.size)
    if spec.field in ("created_at", "updated_at"):
        if not is_date:
            raise InvalidInput(f"{spec.field} needs a date interval (day|week|month|year)",
                               field=f"{at}.interval")
        source: Literal["created_at", "updated_at"] = (
            "created_at" if spec.field == "created_at" else "updated_at")
        return FacetPlan(spec.field, source, "date", spec.size, unit=str(interval))
    name = _property(spec.field, f"{at}.field")
    declared = _declared_type(catalog, kinds, name, f"{at}.field")
    if interval is None:
        return FacetPlan(spec.field, "property", "terms", spec.size, name=name)
    if is_date:
        if declared not in (None, "datetime"):
            raise InvalidInput(f"{name!r} is a {declared}: a date interval needs a datetime",
                               field=f"{at}.interval")
        return FacetPlan(spec.field, "property", "date", spec.size, name=name,
                         unit=str(interval))
    if declared not in (None, "number"):
        raise InvalidInput(f"{name!r} is a {declared}: a numeric interval needs a number",
                           field=f"{at}.interval")
    return FacetPlan(spec.field, "property", "number", spec.size, name=name,
                     width=float(interval))


def plan_sort(spec: SortSpec | None, catalog: KindCatalog,
              kinds: Sequence[str] = ()) -> SortPlan | None:
    """The sort validated against the catalog; None for relevance (the engine's own order)."""
    if spec is None:
        return None
    if spec.order not in (None, "asc", "desc"):
        raise InvalidInput("order must be asc or desc", field="sort.order")
    order = spec.order or ("desc" if spec.field in _DESC_BY_DEFAULT else "asc")
    descending = order == "desc"
    if spec.field == "relevance":
        if not descending:
            raise InvalidInput("relevance sorts only desc", field="sort.order")
        return None
    if spec.field in BUILT_IN_SORTS:
        source: Literal["updated_at", "created_at", "title", "position"] = (
            spec.field)  # type: ignore[assignment]
        return SortPlan(source, descending)
    name = _property(spec.field, "sort.field")
    declared = _declared_type(catalog, kinds, name, "sort.field")
    key_type: KeyType = "any" if declared is None else declared  # type: ignore[assignment]
    return SortPlan("property", descending, name=name, key_type=key_type)
