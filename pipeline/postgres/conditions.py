"""`where` conditions (`pipeline/domain/conditions.py`) as SQL over a jsonb column.

Each leaf becomes `jsonb_path_exists_tz(<column>, <jsonpath>, <variables>)` with the path text and
the variables as statement parameters: a value is never part of the JSONPath text, whose paths
passed a strict pattern and whose other text is ours. The `_tz` form lets a date-only value meet
a date-time bound (the server runs in UTC, so date-only is midnight UTC). Values compare only with
their own type (jsonpath: a string is never `>` a number); an instant-shaped string compares by
`.datetime()`, and a string range leaves instant-shaped strings out, as Tantivy (which indexes
them as dates) does.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from pipeline.domain.conditions import (
    INSTANT_REGEX,
    Condition,
    Group,
    Leaf,
    Not,
    Scalar,
    instant,
    value_type,
)

_COMPARE = {"eq": "==", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_SCALAR_UNDER = ('.** ? (@.type() == "number" || @.type() == "string"'
                 ' || @.type() == "boolean")')
_INSTANT = f'@ like_regex "{INSTANT_REGEX}"'


def compile_condition(cond: Condition, params: dict[str, Any], column: sql.Composable
                      ) -> sql.Composable:
    """`cond` as SQL over the jsonb `column`; its paths and values go into `params`."""
    if isinstance(cond, Group):
        joiner = sql.SQL(" AND " if cond.op == "and" else " OR ")
        return sql.SQL("({})").format(joiner.join(
            compile_condition(m, params, column) for m in cond.members))
    if isinstance(cond, Not):
        return sql.SQL("(NOT {})").format(compile_condition(cond.member, params, column))
    return _leaf(cond, params, column)


def _leaf(leaf: Leaf, params: dict[str, Any], column: sql.Composable) -> sql.Composable:
    if leaf.op == "exists":
        test = _exists(leaf.path + _SCALAR_UNDER, {}, params, column)
        return test if leaf.value else sql.SQL("(NOT {})").format(test)
    if leaf.op == "ne":
        return sql.SQL("({} AND NOT {})").format(
            _exists(leaf.path + _SCALAR_UNDER, {}, params, column),
            _leaf(Leaf(leaf.path, leaf.keys, "eq", leaf.value), params, column))
    values = leaf.value if isinstance(leaf.value, tuple) else (leaf.value,)
    op = "==" if leaf.op == "in" else _COMPARE[leaf.op]
    variables: dict[str, Any] = {}
    tests = []
    for i, value in enumerate(values):
        name = f"v{i}"
        tests.append(_test(op, name, value))
        moment = instant(value)
        variables[name] = moment.isoformat() if moment is not None else value
    return _exists(f"{leaf.path} ? ({' || '.join(tests)})", variables, params, column)


def _test(op: str, name: str, value: Scalar) -> str:
    kind = value_type(value)
    if kind == "datetime":
        return f"({_INSTANT} && @.datetime() {op} ${name}.datetime())"
    if kind == "string" and op != "==":
        return f'(@.type() == "string" && !({_INSTANT}) && @ {op} ${name})'
    return f"@ {op} ${name}"


def _exists(jsonpath: str, variables: dict[str, Any], params: dict[str, Any],
            column: sql.Composable) -> sql.Composable:
    n = len(params)
    path, values = f"w{n}p", f"w{n}v"
    params[path] = jsonpath
    params[values] = Jsonb(variables)
    return sql.SQL("jsonb_path_exists_tz({}, {}::jsonpath, {})").format(
        column, sql.Placeholder(path), sql.Placeholder(values))
