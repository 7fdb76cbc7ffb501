"""The condition language of `where` (memory and search): every accepted condition is bounded and
becomes parameterised JSONPath (values never in the path text), every refused one names its
field, and a condition only ever narrows: `filters` with a `where` never match a row the same
filters without it refuse."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from psycopg import sql

from pipeline.domain.conditions import (
    MAX_DEPTH,
    MEMORY,
    SEARCH,
    Group,
    Leaf,
    Not,
    leaves,
    matches,
    parse_conditions,
)
from pipeline.domain.errors import InvalidInput
from pipeline.domain.kinds import KindCatalog, catalog_from_dict
from pipeline.postgres.conditions import compile_condition
from pipeline.retrieval.requests import check_where, parse_where


def test_nested_and_or_not_parse_to_leaves() -> None:
    cond = parse_conditions({"and": [{"jsonpath": "$.topic", "eq": "x"},
                                     {"or": [{"jsonpath": "$.mood", "in": ["calm", "glad"]},
                                             {"not": {"jsonpath": "$.score", "gte": 3}},
                                             {"jsonpath": "$.tags[*]", "exists": False}]}]},
                            max_leaves=10, grammar=MEMORY)
    assert isinstance(cond, Group) and cond.op == "and"
    topic, either = cond.members
    assert topic == Leaf("$.topic", ("topic",), "eq", "x")
    assert isinstance(either, Group) and either.op == "or"
    assert either.members[0] == Leaf("$.mood", ("mood",), "in", ("calm", "glad"))
    assert either.members[1] == Not(Leaf("$.score", ("score",), "gte", 3))
    assert either.members[2] == Leaf("$.tags[*]", None, "exists", False)
    assert [f for _, f in leaves(cond)] == ["where.and[0]", "where.and[1].or[0]",
                                            "where.and[1].or[1].not", "where.and[1].or[2]"]


@pytest.mark.parametrize(("where", "field"), [
    ({"jsonpath": "$.a') || true || ('", "eq": 1}, "where.jsonpath"),
    ({"jsonpath": "$.a", "eq": {"x": 1}}, "where.eq"),
    ({"jsonpath": "$.a", "gt": True}, "where.gt"),
    ({"jsonpath": "$.a", "eq": 1, "ne": 2}, "where"),
    ({"jsonpath": "$.a", "like": 1}, "where"),
    ({"and": []}, "where.and"),
    ({"not": []}, "where.not"),
    ({"not": {"jsonpath": "$.a", "eq": 1}, "and": []}, "where"),
    ({"and": [{"jsonpath": "$.a", "eq": 1}, {"or": [{"jsonpath": "a", "eq": 1}]}]},
     "where.and[1].or[0].jsonpath"),
    ({"and": [{"and": [{"and": [{"and": [{"jsonpath": "$.a", "eq": 1}]}]}]}]},
     "where.and[0].and[0].and[0].and[0]"),
    ({"not": {"not": {"not": {"not": {"jsonpath": "$.a", "eq": 1}}}}},
     "where.not.not.not.not"),
    ({"jsonpath": "$.a", "in": []}, "where.in"),
    ({"jsonpath": "$.a", "in": [1, [2]]}, "where.in[1]"),
    ({"jsonpath": "$.a", "exists": "yes"}, "where.exists"),
    ({"jsonpath": "$.a", "eq": "2024-02-30"}, "where.eq"),
    ({"jsonpath": "$.a", "eq": 2 ** 60}, "where.eq"),
    ("topic = x", "where"),
])
def test_refused_conditions_name_their_field(where: object, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_conditions(where, max_leaves=10, grammar=MEMORY)
    assert caught.value.field == field


@pytest.mark.parametrize(("where", "field"), [
    ({"jsonpath": "$.tags[0]", "eq": "x"}, "where.jsonpath"),
    ({"jsonpath": "$.a", "eq": None}, "where.eq"),
    ({"and": [{"jsonpath": "$.a", "gte": 1}, {"jsonpath": "$.s", "lt": "a b"}]}, "where.and[1].lt"),
    ({"jsonpath": "$.s", "gt": "10"}, "where.gt"),
    ({"jsonpath": "$.s", "gt": "true"}, "where.gt"),
])
def test_search_refuses_what_an_engine_cannot_honour(where: object, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_where(where)
    assert caught.value.field == field


def test_the_leaf_count_is_capped() -> None:
    where = {"or": [{"jsonpath": "$.a", "eq": i} for i in range(5)]}
    parse_conditions(where, max_leaves=5, grammar=MEMORY)
    with pytest.raises(InvalidInput) as caught:
        parse_conditions(where, max_leaves=4, grammar=MEMORY)
    assert caught.value.field == "where.or[4]"


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8)


@settings(max_examples=300)
@given(_JSON)
def test_any_json_is_bounded_or_refused(raw: Any) -> None:
    try:
        cond = parse_conditions(raw, max_leaves=20, grammar=SEARCH)
    except InvalidInput as refused:
        assert refused.field is not None and refused.field.startswith("where")
        return
    assert sum(1 for _ in leaves(cond)) <= 20 and _depth(cond) <= MAX_DEPTH


def _depth(cond: Any) -> int:
    if isinstance(cond, Leaf):
        return 1
    if isinstance(cond, Not):
        return 1 + _depth(cond.member)
    return 1 + max(_depth(m) for m in cond.members)


@given(st.text(max_size=40), st.one_of(st.text(max_size=20), st.integers(), st.none()))
def test_values_never_enter_the_path_text(key: str, value: object) -> None:
    try:
        cond = parse_conditions({"jsonpath": f"$.{key}", "eq": value}, max_leaves=1,
                                grammar=MEMORY)
    except InvalidInput:
        return
    params: dict[str, Any] = {}
    compile_condition(cond, params, sql.SQL("m"))
    assert params["w0p"].startswith(f"$.{key} ? (")
    assert getattr(params["w0v"], "obj", None) in ({"v0": value}, {"v0": _iso(value)})
    # only member names (ASCII letters, digits, `_`), dots between them, and array steps
    assert key.isascii() and all(ch.isalnum() or ch in "_.[]*" for ch in key)
    assert all(part and not part[0].isdigit() for part in key.split("[")[0].split("."))


def _iso(value: object) -> object:
    from pipeline.domain.conditions import instant
    moment = instant(value)
    return moment.isoformat() if moment is not None else value


def test_the_sql_carries_paths_and_values_as_parameters() -> None:
    hostile = "x') OR true --"
    cond = parse_conditions({"or": [{"jsonpath": "$.topic", "eq": hostile},
                                    {"jsonpath": "$.n", "exists": False}]},
                            max_leaves=5, grammar=MEMORY)
    params: dict[str, object] = {}
    text = compile_condition(cond, params, sql.SQL("r.metadata")).as_string(None)
    assert text == ("(jsonb_path_exists_tz(r.metadata, %(w0p)s::jsonpath, %(w0v)s) OR "
                    "(NOT jsonb_path_exists_tz(r.metadata, %(w2p)s::jsonpath, %(w2v)s)))")
    assert params["w0p"] == "$.topic ? (@ == $v0)"
    assert str(params["w2p"]).startswith("$.n.** ?")
    assert getattr(params["w0v"], "obj", None) == {"v0": hostile}


_ROWS: list[dict[str, Any]] = [
    {"price": 5, "color": "red", "tags": ["a", "b"]}, {"price": 15.5, "color": "blue"},
    {"price": "7"}, {"color": None}, {}, {"price": [1, 30], "when": "2024-05-01"},
    {"when": "2024-05-01T10:00:00+02:00", "n": {"b": 3}},
]
_LEAF = st.builds(lambda path, op, value: {"jsonpath": path, op: value},
                  st.sampled_from(["$.price", "$.color", "$.tags", "$.when", "$.n.b"]),
                  st.sampled_from(["eq", "ne", "gt", "gte", "lt", "lte", "exists"]),
                  st.sampled_from([5, 5.0, 15.5, 1, "red", "blue", "a", "2024-05-01",
                                   "2024-05-01T08:00:00Z", True, False]))
_TREE = st.recursive(_LEAF, lambda inner: st.one_of(
    st.builds(lambda ms: {"and": ms}, st.lists(inner, min_size=1, max_size=3)),
    st.builds(lambda ms: {"or": ms}, st.lists(inner, min_size=1, max_size=3)),
    st.builds(lambda m: {"not": m}, inner)), max_leaves=6)


@settings(max_examples=300)
@given(_TREE)
def test_a_where_only_narrows_and_not_is_the_complement(raw: dict[str, Any]) -> None:
    try:
        cond = parse_where(raw)
    except InvalidInput:
        return
    kept = [r for r in _ROWS if matches(cond, r)]
    negated = [r for r in _ROWS if matches(Not(cond), r)]
    assert len(kept) + len(negated) == len(_ROWS)
    both = Group("and", (cond, Leaf("$.price", ("price",), "exists", True)))
    assert all(r in kept for r in _ROWS if matches(both, r))


def test_semantics_by_example() -> None:
    def rows(raw: dict[str, Any]) -> list[int]:
        return [i for i, r in enumerate(_ROWS) if matches(parse_where(raw), r)]

    assert rows({"jsonpath": "$.price", "gte": 5}) == [0, 1, 5]  # "7" is a string; lists: any
    assert rows({"jsonpath": "$.price", "eq": 5.0}) == [0]
    assert rows({"jsonpath": "$.color", "exists": True}) == [0, 1]  # null is not a value
    assert rows({"jsonpath": "$.color", "ne": "red"}) == [1]
    assert rows({"jsonpath": "$.when", "gte": "2024-05-01T08:00:00Z"}) == [6]  # 08:00Z
    assert rows({"jsonpath": "$.when", "lt": "2024-05-01T00:00:01Z"}) == [5]  # midnight UTC
    assert rows({"jsonpath": "$.n", "exists": True}) == [6]
    assert rows({"not": {"jsonpath": "$.price", "exists": True}}) == [3, 4, 6]


def _catalog() -> KindCatalog:
    return KindCatalog(catalog_from_dict({"kinds": [
        {"kind": "product", "fields": [
            {"name": "price", "type": "number", "operators": ["eq"]},
            {"name": "published", "type": "datetime", "operators": ["eq", "in"]},
            {"name": "featured", "type": "boolean", "operators": ["eq"]},
            {"name": "sku", "type": "string"}]},
        {"kind": "note", "fields": [{"name": "price", "type": "string", "operators": ["eq"]}]},
    ]}))


@pytest.mark.parametrize(("kinds", "where", "field"), [
    (("product",), {"jsonpath": "$.price", "gte": "cheap"}, "where.gte"),
    (("product",), {"and": [{"jsonpath": "$.price", "gte": 1},
                            {"jsonpath": "$.published", "lt": 3}]}, "where.and[1].lt"),
    (("product",), {"jsonpath": "$.featured", "gt": 1}, "where.gt"),
    (("product",), {"jsonpath": "$.sku", "exists": True}, "where.jsonpath"),
    (("product",), {"jsonpath": "$.price.x", "exists": True}, "where.jsonpath"),
    (("product",), {"jsonpath": "$.published", "in": ["2024-01-01", 4]}, "where.in[1]"),
    ((), {"jsonpath": "$.nope", "eq": 1}, "where.jsonpath"),
])
def test_the_catalog_types_the_leaves(kinds: tuple[str, ...], where: dict[str, Any],
                                      field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_where(_catalog(), kinds, parse_where(where))
    assert caught.value.field == field


def test_the_catalog_accepts_values_of_the_field_type() -> None:
    catalog = _catalog()
    check_where(catalog, ("product",), parse_where({"and": [
        {"jsonpath": "$.price", "gte": 1.5}, {"jsonpath": "$.published", "lt": "2024-01-01"},
        {"jsonpath": "$.featured", "exists": True}, {"not": {"jsonpath": "$.featured",
                                                             "eq": True}}]}))
    # any kind: `price` is a number for products and a string for notes
    check_where(catalog, (), parse_where({"jsonpath": "$.price", "gte": "abc"}))
    check_where(catalog, (), parse_where({"jsonpath": "$.price", "gte": 3}))


def test_the_schema_tells_callers_about_where() -> None:
    from pipeline.retrieval.requests import describe_schema

    described = describe_schema(_catalog())
    assert '"where"' in described["filter_usage"] and "not" in described["filter_usage"]
    assert described["where_operators"] == ["eq", "ne", "gt", "gte", "lt", "lte", "in", "exists"]
