"""The condition language of `where` filters (search, find_exact, find_objects and memory search):
a JSON tree of and/or/not over leaves that test the value at a path, checked and bounded here,
compiled by each engine (`pipeline/postgres/conditions.py`, `pipeline/lexical/conditions.py`)
and evaluated in Python by `matches` (graph hits, and the reference the engines are tested
against).

    {"and": [{"jsonpath": "$.price", "gte": 10},
             {"or": [{"jsonpath": "$.color", "in": ["red", "blue"]},
                     {"not": {"jsonpath": "$.archived", "exists": true}}]}]}

A leaf names a path (`$` then `.key` steps; memory also takes `[n]` and `[*]`) and one operator.
Semantics, the same in every engine: a list at the path matches when one of its elements does;
values compare only with values of their own type: numbers as numbers (5 == 5.0), strings
lexicographically by code point, and a string that reads as an ISO-8601 date or date-time
(`is_instant`) as an instant (date-only is midnight UTC, no offset is UTC). `exists` is true when
a non-null value (a scalar, or one under a list or object) is at the path; `ne` is "exists and
no value equals"; `not` is the complement. Errors name the offending field
(`where.and[1].or[0].gte`).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from pipeline.domain.errors import InvalidInput

Scalar: TypeAlias = str | int | float | bool | None
Operator = Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "exists"]
OPERATORS: tuple[Operator, ...] = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "exists")
RANGE_OPERATORS = frozenset({"gt", "gte", "lt", "lte"})
MAX_DEPTH = 4
MAX_IN_VALUES = 50
MAX_STRING_CHARS = 1000
# Integers beyond ±2^53 are not exact as JSON numbers in every client, and Tantivy misreads a
# bound beyond i64 (an unsigned bound matched small numbers in tantivy-py 0.27).
MAX_SAFE_INTEGER = 2 ** 53
_KEY = r"[A-Za-z_][A-Za-z0-9_]{0,63}"
_PATH_RE = re.compile(rf"\$(?:\.{_KEY}|\[(?:\d{{1,4}}|\*)\]){{1,16}}")
_KEYS_PATH_RE = re.compile(rf"\$(?:\.{_KEY}){{1,16}}")
# What a date or date-time string looks like (ISO-8601 as Postgres' jsonpath .datetime() and
# Python's fromisoformat both read it); `INSTANT_REGEX` is the same test for jsonpath.
INSTANT_REGEX = (r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,6})?"
                 r"(Z|[+-][0-9]{2}:[0-9]{2})?)?$")
_INSTANT_RE = re.compile(INSTANT_REGEX)
# A string range bound must read as a string to Tantivy's query parser (which has no quoting
# for range bounds): a word that does not start with a digit and is not a boolean or a float
# spelling.
_WORD_BOUND_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,99}")
_NOT_WORDS = frozenset({"true", "false", "inf", "infinity", "nan"})


@dataclass(frozen=True)
class Leaf:
    """One test: the value at `path` (`keys`: its `.key` steps, None when it has list steps)
    against `value` with `op` (`in`: a tuple of values; `exists`: a bool)."""

    path: str
    keys: tuple[str, ...] | None
    op: Operator
    value: Scalar | tuple[Scalar, ...]


@dataclass(frozen=True)
class Group:
    """`and` (all) or `or` (any) of its members."""

    op: Literal["and", "or"]
    members: tuple[Condition, ...]


@dataclass(frozen=True)
class Not:
    """The complement of `member`."""

    member: Condition


Condition: TypeAlias = Leaf | Group | Not


@dataclass(frozen=True)
class Grammar:
    """What one caller of the language accepts: list steps in paths and null values (memory,
    compiled to SQL only), or only what every search engine honours (`search`)."""

    list_steps: bool
    nulls: bool
    word_bounds: bool  # string range bounds limited to what Tantivy parses as a string


MEMORY = Grammar(list_steps=True, nulls=True, word_bounds=False)
SEARCH = Grammar(list_steps=False, nulls=False, word_bounds=True)
# The most leaves in one search `where`: each is a jsonpath test on every candidate row (SQL) or
# a posting/fast-field scan (Tantivy); memory search allows as many.
MAX_WHERE_LEAVES = 20


def parse_conditions(where: object, *, max_leaves: int, grammar: Grammar,
                     field: str = "where") -> Condition:
    """The checked condition tree of `where`; raises `InvalidInput` naming the bad field."""
    counter = [0]
    return _node(where, field, 1, counter, max_leaves, grammar)


def _node(node: object, field: str, depth: int, counter: list[int], cap: int,
          grammar: Grammar) -> Condition:
    if not isinstance(node, dict) or not node:
        raise InvalidInput("a condition is an object: {'and': [...]}, {'or': [...]}, "
                           "{'not': {...}} or {'jsonpath': '$.key', '<operator>': value}",
                           field=field)
    if depth > MAX_DEPTH:
        raise InvalidInput(f"conditions nest at most {MAX_DEPTH} deep", field=field)
    if "and" in node or "or" in node or "not" in node:
        if len(node) != 1:
            raise InvalidInput("an 'and'/'or'/'not' object has that one key only", field=field)
        op, members = next(iter(node.items()))
        where = f"{field}.{op}"
        if op == "not":
            return Not(_node(members, where, depth + 1, counter, cap, grammar))
        if not isinstance(members, list) or not members:
            raise InvalidInput(f"'{op}' takes a non-empty list of conditions", field=where)
        return Group(op, tuple(_node(m, f"{where}[{i}]", depth + 1, counter, cap, grammar)
                               for i, m in enumerate(members)))
    counter[0] += 1
    if counter[0] > cap:
        raise InvalidInput(f"at most {cap} conditions in one where", field=field)
    return _leaf(node, field, grammar)


def _leaf(node: dict[Any, Any], field: str, grammar: Grammar) -> Leaf:
    path = node.get("jsonpath")
    pattern = _PATH_RE if grammar.list_steps else _KEYS_PATH_RE
    if not isinstance(path, str) or not pattern.fullmatch(path):
        shapes = "$.key, $.key.sub, $.list[0] or $.list[*]" if grammar.list_steps else (
            "$.key or $.key.sub (no [n] or [*] steps: a list matches when one of its "
            "elements does)")
        raise InvalidInput(f"jsonpath must look like {shapes} (keys: letters, digits, "
                           "underscores)", field=f"{field}.jsonpath")
    keys = tuple(path[2:].split(".")) if _KEYS_PATH_RE.fullmatch(path) else None
    ops = [k for k in node if k != "jsonpath"]
    if len(ops) != 1 or ops[0] not in OPERATORS:
        raise InvalidInput(f"a condition has exactly one operator of {', '.join(OPERATORS)}",
                           field=field)
    op: Operator = ops[0]
    value = node[op]
    where = f"{field}.{op}"
    if op == "exists":
        if not isinstance(value, bool):
            raise InvalidInput("exists takes true or false", field=where)
        return Leaf(path, keys, op, value)
    if op == "in":
        if not isinstance(value, list) or not 1 <= len(value) <= MAX_IN_VALUES:
            raise InvalidInput(f"in takes a list of 1 to {MAX_IN_VALUES} values", field=where)
        return Leaf(path, keys, op, tuple(_scalar(item, f"{where}[{i}]", grammar)
                                          for i, item in enumerate(value)))
    checked = _scalar(value, where, grammar)
    if op in RANGE_OPERATORS:
        if checked is None or isinstance(checked, bool):
            raise InvalidInput(f"{op} compares numbers, strings or ISO-8601 date-times",
                               field=where)
        if (grammar.word_bounds and isinstance(checked, str) and not is_instant(checked)
                and (not _WORD_BOUND_RE.fullmatch(checked)
                     or checked.lower() in _NOT_WORDS)):
            raise InvalidInput(
                "a string range bound is a word: a letter, then letters, digits or "
                "underscores (at most 100), not true/false/inf/nan; or an ISO-8601 "
                "date-time, which compares as an instant", field=where)
    return Leaf(path, keys, op, checked)


def _scalar(value: object, field: str, grammar: Grammar) -> Scalar:
    if value is None:
        if not grammar.nulls:
            raise InvalidInput("null is not a value here: {'exists': false} matches a "
                               "missing or null property", field=field)
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        # NaN and ±Infinity (`1e999` parses to inf) have no JSON form: Postgres would refuse
        # the variables, a 500 for what is a bad request
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidInput("a number must be finite (NaN and Infinity have no JSON form; "
                               "1e999 overflows)", field=field)
        if isinstance(value, int) and abs(value) > MAX_SAFE_INTEGER:
            raise InvalidInput(f"an integer is at most {MAX_SAFE_INTEGER} in magnitude",
                               field=field)
        return value
    if isinstance(value, str):
        if len(value) > MAX_STRING_CHARS:
            raise InvalidInput(f"a string value is at most {MAX_STRING_CHARS} characters",
                               field=field)
        if "\x00" in value:
            raise InvalidInput("a string value contains a NUL character", field=field)
        if _INSTANT_RE.fullmatch(value) and instant(value) is None:
            raise InvalidInput(f"{value!r} is not a valid date or date-time", field=field)
        return value
    raise InvalidInput("the value must be a JSON number, string, boolean or null", field=field)


def instant(value: object) -> dt.datetime | None:
    """`value` as an aware UTC instant when it is an ISO-8601 date or date-time string
    (date-only is midnight UTC; no offset is UTC), else None."""
    if not isinstance(value, str) or not _INSTANT_RE.fullmatch(value):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC)


def is_instant(value: object) -> bool:
    """Whether `value` compares as an instant (see `instant`)."""
    return instant(value) is not None


def value_type(value: object) -> str:
    """The type a value compares as: number, string, datetime, boolean or null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    # shaped like an instant but not one (2024-02-30): a datetime that equals nothing
    return "datetime" if isinstance(value, str) and _INSTANT_RE.fullmatch(value) else "string"


def leaves(cond: Condition) -> Iterator[tuple[Leaf, str]]:
    """Every leaf of `cond` with the field that names it (`where.and[1].gte` style, without
    the operator)."""
    yield from _leaves(cond, "where")


def _leaves(cond: Condition, field: str) -> Iterator[tuple[Leaf, str]]:
    if isinstance(cond, Leaf):
        yield cond, field
    elif isinstance(cond, Not):
        yield from _leaves(cond.member, f"{field}.not")
    else:
        for i, member in enumerate(cond.members):
            yield from _leaves(member, f"{field}.{cond.op}[{i}]")


# --- evaluation in Python: the reference semantics ------------------------------------------

def matches(cond: Condition, document: Mapping[str, Any]) -> bool:
    """Whether `document` (an object's properties) satisfies `cond`."""
    if isinstance(cond, Group):
        results = (matches(m, document) for m in cond.members)
        return all(results) if cond.op == "and" else any(results)
    if isinstance(cond, Not):
        return not matches(cond.member, document)
    found = list(_values(document, cond.path))
    if cond.op == "exists":
        return any(_has_scalar(v) for v in found) is cond.value
    scalars = [v for v in found if not isinstance(v, (dict, list))]
    if cond.op == "in":
        assert isinstance(cond.value, tuple)
        return any(_equal(v, w) for v in scalars for w in cond.value)
    assert not isinstance(cond.value, tuple)
    if cond.op == "eq":
        return any(_equal(v, cond.value) for v in scalars)
    if cond.op == "ne":
        return (any(_has_scalar(v) for v in found)
                and not any(_equal(v, cond.value) for v in scalars))
    return any(_compare(v, cond.op, cond.value) for v in scalars)


def _values(document: Any, path: str) -> Iterator[Any]:
    """The values at `path`, lax like jsonpath: a list is looked through for a key step and
    its elements are the values at the end."""
    current: list[Any] = [document]
    for step in re.findall(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+|\*)\]", path):
        key, index = step
        nxt: list[Any] = []
        for item in current:
            if key:
                for obj in (item if isinstance(item, list) else [item]):
                    if isinstance(obj, dict) and key in obj:
                        nxt.append(obj[key])
            elif isinstance(item, list):
                nxt.extend(item if index == "*" else item[int(index):int(index) + 1])
            elif index in ("*", "0"):
                nxt.append(item)
        current = nxt
    for item in current:
        if isinstance(item, list):
            yield from item
        else:
            yield item


def _has_scalar(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_scalar(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_scalar(v) for v in value)
    return value is not None


def _equal(stored: Any, wanted: Scalar) -> bool:
    kind = value_type(wanted)
    if value_type(stored) != kind:
        return False
    if kind == "datetime":
        moment = instant(stored)
        return moment is not None and moment == instant(wanted)
    return bool(stored == wanted)


def _compare(stored: Any, op: str, bound: Scalar) -> bool:
    kind = value_type(bound)
    if value_type(stored) != kind:
        return False
    a: Any
    b: Any
    a, b = (instant(stored), instant(bound)) if kind == "datetime" else (stored, bound)
    if a is None or b is None:
        return False
    if op == "gt":
        return bool(a > b)
    if op == "gte":
        return bool(a >= b)
    if op == "lt":
        return bool(a < b)
    return bool(a <= b)
