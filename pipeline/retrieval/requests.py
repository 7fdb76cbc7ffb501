"""What a read request may ask: its query text and page size, its filters checked against the
kind catalog, and the catalog described to callers (which fields they may filter on).

Every read (search, exact find, entity and link find, expansion, continue) checks its input here
before any store is asked, so a bad request fails the same way whichever endpoint it came to.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from pipeline.domain.conditions import (
    MAX_WHERE_LEAVES,
    OPERATORS,
    RANGE_OPERATORS,
    SEARCH,
    Condition,
    Leaf,
    leaves,
    parse_conditions,
    value_type,
)
from pipeline.domain.errors import (
    InvalidFilter,
    InvalidInput,
    NotFound,
    QueryRequired,
    TooManyFilters,
    TooManyTerms,
)
from pipeline.domain.kinds import KindCatalog, KindSpec, is_valid_property_key
from pipeline.domain.read_model import Filters

MAX_LIMIT = 100
MAX_QUERY_CHARS = 2000
# Reading an object's parts (`children`): the page size and the furthest offset (far beyond any
# object's part count; it keeps the offset a number Postgres takes).
MAX_CHILDREN_LIMIT = 1000
MAX_CHILDREN_OFFSET = 1_000_000

# Defaults of the per-request caps (settings `api_max_query_terms`, `api_max_filters`): every
# distinct word costs a posting scan, a trigram lookup and a snippet match, every property
# filter a condition on each candidate row.
MAX_QUERY_TERMS = 128
MAX_FILTERS = 16
# Which value types a `where` leaf may compare with a declared field of each type.
_ACCEPTS = {"number": {"number"}, "datetime": {"datetime"}, "boolean": {"boolean"},
            "string": {"string", "datetime"}}

_WORD = re.compile(r"\w+", re.UNICODE)

FILTER_USAGE = (
    "Filters apply to search, find_exact and find_objects as {\"filters\": {...}}: "
    "kind (a kind or a list), title (case-insensitive substring), created_after, created_before, "
    "updated_after, updated_before (ISO-8601), and any filterable field below as "
    "\"<field>\": value (eq) or \"<field>\": [values] (in, where the field allows it). "
    "A part is filtered by its parent. An empty catalog means open mode: any property "
    "may be filtered with eq/in. "
    "Beside filters, {\"where\": {...}} takes conditions on properties: leaves "
    "{\"jsonpath\": \"$.price\", \"gte\": 10} with one of eq, ne, gt, gte, lt, lte, in "
    "(a list), exists (true/false), combined by {\"and\": [...]}, {\"or\": [...]}, "
    "{\"not\": {...}} (4 deep, 20 leaves). Every filterable field takes every operator; "
    "ranges need a number, datetime or string field and a value of its type (datetimes as "
    "ISO-8601, compared as instants; date-only is midnight UTC)."
)
ENDPOINTS_WITH_FILTERS = ("search", "find_exact", "find_objects")


def query_text(query: str, *, max_terms: int = MAX_QUERY_TERMS) -> str:
    """The query as the channels get it (stripped); refuses an empty, overlong or NUL query,
    and one with more than `max_terms` distinct words (TooManyTerms)."""
    text = query.strip()
    if not text:
        raise QueryRequired("query must not be empty", field="query")
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidInput(f"query is longer than {MAX_QUERY_CHARS} characters", field="query")
    if "\x00" in text:
        raise InvalidInput("query contains a NUL character", field="query")
    terms = len({w.lower() for w in _WORD.findall(text)})
    if terms > max_terms:
        raise TooManyTerms(f"query has {terms} distinct words; at most {max_terms} are allowed",
                           field="query")
    return text


def check_limit(limit: int) -> int:
    """`limit` if it is a valid page size (1..MAX_LIMIT); InvalidInput(field="limit") otherwise."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}", field="limit")
    return limit


def check_children_page(offset: int, limit: int) -> None:
    """A page of an object's parts: limit 1..MAX_CHILDREN_LIMIT, offset 0..MAX_CHILDREN_OFFSET;
    InvalidInput naming the field otherwise."""
    if not 1 <= limit <= MAX_CHILDREN_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_CHILDREN_LIMIT}", field="limit")
    if not 0 <= offset <= MAX_CHILDREN_OFFSET:
        raise InvalidInput(f"offset must be between 0 and {MAX_CHILDREN_OFFSET}",
                           field="offset")


def check_filters(catalog: KindCatalog, filters: Filters, *,
                  max_filters: int = MAX_FILTERS) -> None:
    """Property filters must name filterable fields of the catalog (when it is not empty), and
    kinds must be declared ones; any property may be filtered in open mode. At most
    `max_filters` property filters (TooManyFilters)."""
    if len(filters.properties) > max_filters:
        raise TooManyFilters(f"{len(filters.properties)} property filters; at most "
                             f"{max_filters} are allowed", field="filters")
    for name, values in filters.properties:
        if not is_valid_property_key(name):
            raise InvalidFilter(f"{name!r} is not a valid property name",
                                field=f"filters.{name}")
        if not values:
            raise InvalidFilter(f"filter {name!r} needs at least one value",
                                field=f"filters.{name}")
        if not catalog.is_open:
            catalog.validate_filter(list(filters.kinds) or None, name,
                                    "in" if len(values) > 1 else "eq")
    if not catalog.is_open:
        unknown = [k for k in filters.kinds if catalog.get(k) is None]
        if unknown:
            raise InvalidFilter(f"unknown kind {unknown[0]!r}", field="kind")
    if filters.where is not None:
        check_where(catalog, filters.kinds, filters.where)


def parse_where(where: object) -> Condition:
    """A request's `where` checked and bounded (InvalidInput naming the field)."""
    return parse_conditions(where, max_leaves=MAX_WHERE_LEAVES, grammar=SEARCH)


def with_where(filters: Filters, where: object | None) -> Filters:
    """`filters` carrying the request's `where` (parsed; None leaves them as they are)."""
    return filters if where is None else replace(filters, where=parse_where(where))


def check_where(catalog: KindCatalog, kinds: tuple[str, ...], where: Condition) -> None:
    """Each leaf of `where` must name a field declared filterable for one of `kinds` (all kinds
    when none), with an operator its type allows and values of its type; anything goes in
    open mode. A declared field is a scalar or a list of scalars, so paths are one key deep."""
    if catalog.is_open:
        return
    specs = [s for s in (catalog.get(k) for k in kinds) if s is not None] if kinds \
        else catalog.specs
    for leaf, field in leaves(where):
        _check_leaf(leaf, field, specs, kinds)


def _check_leaf(leaf: Leaf, field: str, specs: list[KindSpec],
                kinds: tuple[str, ...]) -> None:
    scope = "kinds " + ", ".join(kinds) if kinds else "any kind"
    if leaf.keys is None or len(leaf.keys) != 1:
        raise InvalidFilter(f"{leaf.path}: a declared field is one key deep ($.name)",
                            field=f"{field}.jsonpath")
    name = leaf.keys[0]
    fields = [f for f in (s.field(name) for s in specs) if f is not None and f.operators]
    if not fields:
        raise InvalidFilter(f"property {name!r} is not filterable for {scope}",
                            field=f"{field}.jsonpath")
    where = f"{field}.{leaf.op}"
    if leaf.op in RANGE_OPERATORS:
        fields = [f for f in fields if f.type in ("number", "datetime", "string")]
        if not fields:
            raise InvalidFilter(f"{leaf.op} needs a number, datetime or string field; "
                                f"{name!r} is not one", field=where)
    if leaf.op == "exists":
        return
    values = leaf.value if isinstance(leaf.value, tuple) else (leaf.value,)
    for i, value in enumerate(values):
        have = value_type(value)
        if not any(have in _ACCEPTS[f.type] for f in fields):
            types = " or ".join(sorted({f.type for f in fields}))
            raise InvalidFilter(f"{name!r} is a {types} field; {value!r} is a {have}",
                                field=f"{where}[{i}]" if leaf.op == "in" else where)


def describe_schema(catalog: KindCatalog, kind: str | None = None) -> dict[str, Any]:
    """The kinds (all, or the one named) with their fields and filter operators, and how to
    filter; NotFound for a kind the catalog does not declare."""
    specs = catalog.specs
    if kind is not None:
        specs = [s for s in specs if s.kind == kind]
        if not specs:
            raise NotFound(f"unknown kind {kind!r}", field="kind")
    return {
        "open_mode": catalog.is_open,
        "kinds": [{
            "kind": s.kind, "description": s.description, "is_parent": s.is_parent,
            "is_part": s.is_part,
            "fields": [{"name": f.name, "type": f.type, "description": f.description,
                        "required": f.required, "operators": list(f.operators),
                        "filterable": bool(f.operators), "examples": list(f.examples)}
                       for f in s.fields],
        } for s in specs],
        "filter_usage": FILTER_USAGE,
        "where_operators": list(OPERATORS),
        "endpoints_with_filters": list(ENDPOINTS_WITH_FILTERS),
    }
