"""Statement plans: a sequence of SQL statements, written once, run on a synchronous connection
(the worker's proposal pass) or an asynchronous one (the API) alike.

A plan is a generator: it yields a `Statement` and is sent back the statement's rows (an empty
list for a statement without a result), so its logic between statements (which entity survives
a merge, whether a pair was refused) is the same code on both sides. `run` and `arun` execute a
plan in one transaction (a savepoint when the caller already opened one).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import sql

T = TypeVar("T")
Rows = list[tuple[Any, ...]]


@dataclass(frozen=True)
class Statement:
    """One statement of a plan and its parameters. `prepare=False` sends it unprepared, so
    Postgres plans it for its actual parameters every time (psycopg prepares a statement after
    five executions, and Postgres may then keep a generic plan: one that does not know a
    `LIMIT %s` is 5 costs a kNN by HNSW index as if it read a tenth of the table)."""

    query: str | sql.SQL | sql.Composed
    params: Mapping[str, Any] | Sequence[Any] | None = None
    prepare: bool | None = None


Plan = Generator[Statement, Rows, T]


def run(conn: psycopg.Connection[Any], plan: Plan[T]) -> T:
    """Execute `plan` on a synchronous connection, in one transaction; its result."""
    with conn.transaction():
        try:
            statement = next(plan)
            while True:
                cur = conn.execute(statement.query, statement.params, prepare=statement.prepare)
                statement = plan.send(cur.fetchall() if cur.description else [])
        except StopIteration as done:
            result: T = done.value
            return result


async def arun(conn: psycopg.AsyncConnection[Any], plan: Plan[T]) -> T:
    """Execute `plan` on an asynchronous connection, in one transaction; its result."""
    async with conn.transaction():
        try:
            statement = next(plan)
            while True:
                cur = await conn.execute(statement.query, statement.params,
                                         prepare=statement.prepare)
                statement = plan.send(await cur.fetchall() if cur.description else [])
        except StopIteration as done:
            result: T = done.value
            return result
