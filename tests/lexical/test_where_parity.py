"""`where` means the same in the three places it runs: the SQL compilation (every Postgres
channel), the Tantivy query (the default lexical engine) and the Python evaluation (graph hits,
and the reference): over one table of properties covering numbers of both kinds (5, 5.0, 15.5),
number-like strings, instants in every accepted shape, strings of mixed case and script, lists,
nested objects, null and missing keys, each generated condition selects the same rows."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import tantivy
from hypothesis import HealthCheck, given, settings, strategies as st
from psycopg import sql
from psycopg.types.json import Jsonb

from pipeline.domain.conditions import Condition, matches
from pipeline.domain.errors import InvalidInput
from pipeline.lexical.conditions import condition_query
from pipeline.lexical.documents import (
    SCHEMA,
    RowDocument,
    register_tokenizers,
    to_document,
)
from pipeline.postgres.conditions import compile_condition
from pipeline.retrieval.requests import parse_where
from pipeline.settings import Settings

ROWS: list[dict[str, Any]] = [
    {"price": 5, "name": "apple", "tags": ["x", "y"], "n": {"b": 3}},
    {"price": 15.5, "name": "banana", "tags": [1, 20], "when": "2024-05-01"},
    {"price": "7", "name": "Cherry", "when": "2024-06-01T10:00:00+02:00"},
    {"price": -3, "name": "äpfel", "n": [{"b": 10}, {"b": 1}], "when": "2024-05-01T00:00:00"},
    {"price": 10, "name": "b", "when": "2024-05-01T00:00:00Z", "flag": True},
    {"price": 5.0, "name": None, "flag": False, "when": "2024-05-01 07:30:00"},
    {"price": [5, 30], "tags": [], "n": {}},
    {"name": "10", "when": "not a date", "price": True},
    {},
    {"price": 9007199254740000, "name": "zebra", "when": ["2023-12-31", "2025-01-01T00:00:00Z"]},
    {"when": "2024-05-01T07:30:00.5Z"},
]
_IDS = [uuid.UUID(int=i + 1) for i in range(len(ROWS))]
_PATHS = ["$.price", "$.name", "$.tags", "$.when", "$.n.b", "$.n", "$.flag", "$.missing"]
_VALUES = [5, 5.0, 15.5, -3, 0, 7, 10, 30, 0.5, 9007199254740000, "7", "10", "apple", "b",
           "banana", "Cherry", "x", "zebra", "ä", "2024-05-01", "2024-05-01T00:00:00Z",
           "2024-05-01T07:30:00+00:00", "2024-05-01T07:30:00.5Z", "2024-06-01T08:00:00Z",
           "2024-06-01", True, False]
_LEAF = st.builds(lambda path, op, value: {"jsonpath": path, op: value},
                  st.sampled_from(_PATHS),
                  st.sampled_from(["eq", "ne", "gt", "gte", "lt", "lte", "exists"]),
                  st.sampled_from(_VALUES))
_IN = st.builds(lambda path, values: {"jsonpath": path, "in": values},
                st.sampled_from(_PATHS), st.lists(st.sampled_from(_VALUES), min_size=1,
                                                   max_size=3))
_TREE = st.recursive(_LEAF | _IN, lambda inner: st.one_of(
    st.builds(lambda ms: {"and": ms}, st.lists(inner, min_size=1, max_size=3)),
    st.builds(lambda ms: {"or": ms}, st.lists(inner, min_size=1, max_size=3)),
    st.builds(lambda m: {"not": m}, inner)), max_leaves=5)


@pytest.fixture(scope="module")
def pg(stack_settings: Settings) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(stack_settings.effective_postgres_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="module")
def index() -> tantivy.Index:
    idx = tantivy.Index(SCHEMA)
    register_tokenizers(idx)
    writer = idx.writer()
    now = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    for i, props in enumerate(ROWS):  # the body (stored) says which row
        writer.add_document(to_document(RowDocument(_IDS[i], _IDS[i], "k", None, now, now,
                                                    props, {}, str(i))))
    writer.commit()
    idx.reload()
    return idx


def _sql_rows(pg: psycopg.Connection[Any], cond: Condition) -> set[int]:
    params: dict[str, Any] = {}
    test = compile_condition(cond, params, sql.SQL("t.props"))
    values = sql.SQL(", ").join(sql.SQL("({}, {})").format(sql.Literal(i), sql.Placeholder(f"r{i}"))
                                for i in range(len(ROWS)))
    for i, props in enumerate(ROWS):
        params[f"r{i}"] = Jsonb(props)
    statement = sql.SQL("SELECT t.i FROM (VALUES {}) AS t(i, props) WHERE {}").format(
        values, test)
    return {r[0] for r in pg.execute(statement, params).fetchall()}


def _tantivy_rows(index: tantivy.Index, cond: Condition) -> set[int]:
    searcher = index.searcher()
    hits = searcher.search(condition_query(cond), len(ROWS) + 1).hits
    found = set()
    for _, address in hits:
        found.add(int(searcher.doc(address)["body"][0]))
    return found


def _check(pg: psycopg.Connection[Any], index: tantivy.Index, raw: dict[str, Any]) -> None:
    try:
        cond = parse_where(raw)
    except InvalidInput:
        return
    expected = {i for i, props in enumerate(ROWS) if matches(cond, props)}
    assert _sql_rows(pg, cond) == expected, ("sql", raw)
    assert _tantivy_rows(index, cond) == expected, ("tantivy", raw)


@pytest.mark.parametrize(("raw", "rows"), [
    ({"jsonpath": "$.price", "gte": 5}, {0, 1, 4, 5, 6, 9}),
    ({"jsonpath": "$.price", "lt": 5.5}, {0, 3, 5, 6}),
    ({"jsonpath": "$.price", "eq": 5}, {0, 5, 6}),
    ({"jsonpath": "$.price", "eq": "7"}, {2}),
    ({"jsonpath": "$.price", "gt": 0.5}, {0, 1, 4, 5, 6, 9}),
    ({"jsonpath": "$.name", "gte": "b"}, {1, 3, 4, 9}),
    ({"jsonpath": "$.name", "lt": "b"}, {0, 2, 7}),
    ({"jsonpath": "$.when", "gte": "2024-05-01"}, {1, 2, 3, 4, 5, 9, 10}),
    ({"jsonpath": "$.when", "gt": "2024-05-01T00:00:00Z"}, {2, 5, 9, 10}),
    ({"jsonpath": "$.when", "eq": "2024-05-01T07:30:00+00:00"}, {5}),
    ({"jsonpath": "$.when", "in": ["2024-05-01T07:30:00.5Z", "2023-12-31"]}, {9, 10}),
    ({"jsonpath": "$.when", "eq": "2024-05-01T00:00:00+00:00"}, {1, 3, 4}),
    ({"jsonpath": "$.when", "lt": "2024-06-01T08:00:00Z"}, {1, 3, 4, 5, 9, 10}),
    ({"jsonpath": "$.tags", "gte": 10}, {1}),
    ({"jsonpath": "$.tags", "exists": True}, {0, 1}),
    ({"jsonpath": "$.n", "exists": True}, {0, 3}),
    ({"jsonpath": "$.n.b", "gte": 5}, {3}),
    ({"jsonpath": "$.name", "ne": "apple"}, {1, 2, 3, 4, 7, 9}),
    ({"not": {"jsonpath": "$.name", "exists": True}}, {5, 6, 8, 10}),
    ({"jsonpath": "$.flag", "eq": False}, {5}),
])
def test_each_construct_selects_the_same_rows_everywhere(
        pg: psycopg.Connection[Any], index: tantivy.Index, raw: dict[str, Any],
        rows: set[int]) -> None:
    cond = parse_where(raw)
    assert {i for i, props in enumerate(ROWS) if matches(cond, props)} == rows
    assert _sql_rows(pg, cond) == rows
    assert _tantivy_rows(index, cond) == rows


@settings(max_examples=250, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_TREE)
def test_generated_conditions_select_the_same_rows_everywhere(
        pg: psycopg.Connection[Any], index: tantivy.Index, raw: dict[str, Any]) -> None:
    _check(pg, index, raw)
