"""`where` conditions (`pipeline/domain/conditions.py`) as Tantivy queries on the properties JSON
field, with the semantics of `pipeline/postgres/conditions.py` (tests/lexical compare both).

Equality is a typed term (5 matches 5.0, "5" does not match 5), or for an instant a range of one
point on the fast field (the index holds instant-shaped strings as dates,
`documents.json_properties`; a date term would keep only seconds). A range is one bound
in Tantivy's query syntax, parsed against the schema: tantivy-py's range query takes no JSON path.
The text is injection-proof: the path's keys passed a strict pattern, numbers and instants are
formatted here, and a string bound is a plain word (the parser checked it). One bound per query
(bar an instant's equality): a two-sided range of mixed number types panics inside tantivy 0.27.
`exists` is the fast JSON field's exists query, counting values under an object.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from functools import cache

import tantivy

from pipeline.domain.conditions import Condition, Group, Leaf, Not, Scalar, instant
from pipeline.lexical.documents import PROPERTIES, SCHEMA

_SYMBOL = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


@cache
def _parser() -> tantivy.Index:
    # an empty in-memory index: the query parser needs one, and only its schema matters
    return tantivy.Index(SCHEMA)


def condition_query(cond: Condition) -> tantivy.Query:
    """`cond` as one Tantivy query (matching documents; its score is not used)."""
    if isinstance(cond, Group):
        occur = tantivy.Occur.Must if cond.op == "and" else tantivy.Occur.Should
        return tantivy.Query.boolean_query([(occur, condition_query(m)) for m in cond.members])
    if isinstance(cond, Not):
        return _complement(condition_query(cond.member))
    return _leaf(cond)


def _complement(query: tantivy.Query) -> tantivy.Query:
    return tantivy.Query.boolean_query([(tantivy.Occur.Must, tantivy.Query.all_query()),
                                        (tantivy.Occur.MustNot, query)])


def _leaf(leaf: Leaf) -> tantivy.Query:
    assert leaf.keys is not None  # the search grammar has key steps only
    path = ".".join((PROPERTIES, *leaf.keys))
    exists = tantivy.Query.exists_query(path, json_subpaths=True)
    if leaf.op == "exists":
        return exists if leaf.value else _complement(exists)
    if leaf.op == "ne":
        return tantivy.Query.boolean_query([(tantivy.Occur.Must, exists),
                                            (tantivy.Occur.MustNot, _equal(path, leaf.value))])
    if leaf.op in ("eq", "in"):
        values = leaf.value if isinstance(leaf.value, tuple) else (leaf.value,)
        return tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, _equal(path, v)) for v in values])
    return _parser().parse_query(f"{path}:{_SYMBOL[leaf.op]}{_bound(leaf.value)}", [])


def _equal(path: str, value: Scalar | tuple[Scalar, ...]) -> tantivy.Query:
    assert value is not None and not isinstance(value, tuple)
    if instant(value) is not None:
        # a date term keeps seconds; the fast field keeps microseconds, as Postgres does. One
        # two-sided range (both bounds dates): two one-sided ones could each match another
        # element of a list
        bound = _bound(value)
        return _parser().parse_query(f"{path}:[{bound} TO {bound}]", [])
    return tantivy.Query.term_query(SCHEMA, path, value)


def _bound(value: Scalar | tuple[Scalar, ...]) -> str:
    moment = instant(value)
    if moment is not None:
        return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, bool) or value is None or isinstance(value, tuple):
        raise AssertionError("the parser lets only numbers and strings bound a range")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer():
            return str(int(value))
        return format(Decimal(repr(value)), "f")
    return value  # a plain word (Grammar.word_bounds)
