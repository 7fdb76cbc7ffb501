"""The where-compiler: every accepted condition becomes a parameterised JSONPath test (values
never in the path text), every refused one names its field."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from pipeline.domain.errors import InvalidInput
from pipeline.memory.where import Group, PathCondition, parse_where


def test_nested_and_or_compile_to_path_conditions() -> None:
    cond = parse_where({"and": [{"jsonpath": "$.topic", "eq": "x"},
                                {"or": [{"jsonpath": "$.mood", "in": ["calm", "glad"]},
                                        {"jsonpath": "$.score", "gte": 3},
                                        {"jsonpath": "$.tags[*]", "exists": False}]}]},
                       max_conditions=10)
    assert isinstance(cond, Group) and cond.op == "and"
    topic, either = cond.members
    assert topic == PathCondition("$.topic ? (@ == $v)", {"v": "x"})
    assert isinstance(either, Group) and either.op == "or"
    assert either.members[0] == PathCondition("$.mood ? (@ == $v0 || @ == $v1)",
                                              {"v0": "calm", "v1": "glad"})
    assert either.members[1] == PathCondition("$.score ? (@ >= $v)", {"v": 3})
    assert either.members[2] == PathCondition("$.tags[*]", {}, negate=True)


@pytest.mark.parametrize(("where", "field"), [
    ({"jsonpath": "$.a') || true || ('", "eq": 1}, "where.jsonpath"),
    ({"jsonpath": "$.a", "eq": {"x": 1}}, "where.eq"),
    ({"jsonpath": "$.a", "gt": True}, "where.gt"),
    ({"jsonpath": "$.a", "eq": 1, "ne": 2}, "where"),
    ({"jsonpath": "$.a", "like": 1}, "where"),
    ({"and": []}, "where.and"),
    ({"and": [{"jsonpath": "$.a", "eq": 1}, {"or": [{"jsonpath": "a", "eq": 1}]}]},
     "where.and[1].or[0].jsonpath"),
    ({"and": [{"and": [{"and": [{"and": [{"jsonpath": "$.a", "eq": 1}]}]}]}]},
     "where.and[0].and[0].and[0].and[0]"),
    ({"jsonpath": "$.a", "in": []}, "where.in"),
    ({"jsonpath": "$.a", "in": [1, [2]]}, "where.in[1]"),
    ({"jsonpath": "$.a", "exists": "yes"}, "where.exists"),
    ("topic = x", "where"),
])
def test_refused_conditions_name_their_field(where: object, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_where(where, max_conditions=10)
    assert caught.value.field == field


def test_the_condition_count_is_capped() -> None:
    where = {"or": [{"jsonpath": "$.a", "eq": i} for i in range(5)]}
    parse_where(where, max_conditions=5)
    with pytest.raises(InvalidInput) as caught:
        parse_where(where, max_conditions=4)
    assert caught.value.field == "where.or[4]"


@given(st.text(max_size=40), st.one_of(st.text(max_size=20), st.integers(), st.none()))
def test_values_never_enter_the_path_text(key: str, value: object) -> None:
    try:
        cond = parse_where({"jsonpath": f"$.{key}", "eq": value}, max_conditions=1)
    except InvalidInput:
        return
    assert isinstance(cond, PathCondition)
    assert cond.jsonpath == f"$.{key} ? (@ == $v)" and cond.variables == {"v": value}
    # only member names (ASCII letters, digits, `_`), dots between them, and array steps
    assert key.isascii() and all(ch.isalnum() or ch in "_.[]*" for ch in key)
    assert all(part and not part[0].isdigit() for part in key.split("[")[0].split("."))


def test_the_sql_carries_paths_and_values_as_parameters() -> None:
    from psycopg import sql

    from pipeline.memory.store.search import compile_where

    hostile = "x') OR true --"
    cond = parse_where({"or": [{"jsonpath": "$.topic", "eq": hostile},
                               {"jsonpath": "$.n", "exists": False}]}, max_conditions=5)
    params: dict[str, object] = {}
    text = compile_where(cond, params, sql.SQL("r.metadata")).as_string(None)
    assert text == ("(jsonb_path_exists(r.metadata, %(w0p)s::jsonpath, %(w0v)s) OR "
                    "NOT jsonb_path_exists(r.metadata, %(w2p)s::jsonpath, %(w2v)s))")
    assert params["w0p"] == "$.topic ? (@ == $v)" and params["w2p"] == "$.n"
    assert getattr(params["w0v"], "obj", None) == {"v": hostile}
