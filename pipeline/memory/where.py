"""The metadata filter of memory search: a JSONPath-style `where` with and/or, checked and turned
into SQL/JSONPath conditions whose values travel as JSONPath variables.

    {"and": [{"jsonpath": "$.topic", "eq": "x"},
             {"or": [{"jsonpath": "$.mood", "in": ["calm", "glad"]},
                     {"jsonpath": "$.score", "gte": 3}]}]}

A leaf names a path (`$` then `.key`, `[n]` or `[*]` steps; keys are plain identifiers) and one
operator: eq, ne, gt, gte, lt, lte, in (a list of scalars), or exists (true/false). Each leaf
becomes `jsonb_path_exists(metadata, <path ? (@ op $v)>, <vars>)` with the path and the variables
as statement parameters (`pipeline/memory/store/search.py`): a value is never part of
the JSONPath text, and the path itself passes the strict pattern below or is refused. `ne`
matches rows whose key exists with another value (JSONPath semantics).
Errors name the offending field (`where.and[1].or[0].gte`).
"""

from __future__ import annotations

import math
import re
from typing import Any, TypeAlias

from pipeline.domain.errors import InvalidInput
from pipeline.domain.memory_values import Condition, Group, PathCondition

_PATH_RE = re.compile(r"\$(?:\.[A-Za-z_][A-Za-z0-9_]{0,63}|\[(?:\d{1,4}|\*)\]){1,16}")
_COMPARE = {"eq": "==", "ne": "!=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
OPERATORS = (*_COMPARE, "in", "exists")
MAX_DEPTH = 4
MAX_IN_VALUES = 50
MAX_STRING_CHARS = 1000
Scalar: TypeAlias = str | int | float | bool | None


def parse_where(where: object, *, max_conditions: int, field: str = "where") -> Condition:
    """The checked condition tree of `where`; raises `InvalidInput` naming the bad field."""
    counter = [0]
    return _node(where, field, 1, counter, max_conditions)


def _node(node: object, field: str, depth: int, counter: list[int], cap: int) -> Condition:
    if not isinstance(node, dict) or not node:
        raise InvalidInput("a condition is an object: {'and': [...]}, {'or': [...]}, or "
                           "{'jsonpath': '$.key', '<operator>': value}", field=field)
    if depth > MAX_DEPTH:
        raise InvalidInput(f"conditions nest at most {MAX_DEPTH} deep", field=field)
    if "and" in node or "or" in node:
        if len(node) != 1:
            raise InvalidInput("an 'and'/'or' object has that one key only", field=field)
        op, members = next(iter(node.items()))
        where = f"{field}.{op}"
        if not isinstance(members, list) or not members:
            raise InvalidInput(f"'{op}' takes a non-empty list of conditions", field=where)
        return Group(op, tuple(_node(m, f"{where}[{i}]", depth + 1, counter, cap)
                               for i, m in enumerate(members)))
    counter[0] += 1
    if counter[0] > cap:
        raise InvalidInput(f"at most {cap} conditions in one where", field=field)
    return _leaf(node, field)


def _leaf(node: dict[Any, Any], field: str) -> PathCondition:
    path = node.get("jsonpath")
    if not isinstance(path, str) or not _PATH_RE.fullmatch(path):
        raise InvalidInput("jsonpath must look like $.key, $.key.sub, $.list[0] or $.list[*] "
                           "(keys: letters, digits, underscores)", field=f"{field}.jsonpath")
    ops = [k for k in node if k != "jsonpath"]
    if len(ops) != 1 or ops[0] not in OPERATORS:
        raise InvalidInput(f"a condition has exactly one operator of {', '.join(OPERATORS)}",
                           field=field)
    op = ops[0]
    value = node[op]
    where = f"{field}.{op}"
    if op == "exists":
        if not isinstance(value, bool):
            raise InvalidInput("exists takes true or false", field=where)
        return PathCondition(path, {}, negate=not value)
    if op == "in":
        if not isinstance(value, list) or not 1 <= len(value) <= MAX_IN_VALUES:
            raise InvalidInput(f"in takes a list of 1 to {MAX_IN_VALUES} values", field=where)
        for i, item in enumerate(value):
            _scalar(item, f"{where}[{i}]")
        test = " || ".join(f"@ == $v{i}" for i in range(len(value)))
        return PathCondition(f"{path} ? ({test})", {f"v{i}": v for i, v in enumerate(value)})
    _scalar(value, where)
    if op not in ("eq", "ne") and (value is None or isinstance(value, bool)):
        raise InvalidInput(f"{op} compares numbers or strings", field=where)
    return PathCondition(f"{path} ? (@ {_COMPARE[op]} $v)", {"v": value})


def _scalar(value: object, field: str) -> Scalar:
    if value is None or isinstance(value, (bool, int, float)):
        # NaN and ±Infinity (`1e999` parses to inf) have no JSON form: Postgres would refuse
        # the variables, a 500 for what is a bad request
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidInput("a number must be finite (NaN and Infinity have no JSON form; "
                               "1e999 overflows)", field=field)
        return value
    if isinstance(value, str):
        if len(value) > MAX_STRING_CHARS:
            raise InvalidInput(f"a string value is at most {MAX_STRING_CHARS} characters",
                               field=field)
        return value
    raise InvalidInput("the value must be a JSON number, string, boolean or null", field=field)
