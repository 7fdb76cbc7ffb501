"""`brainstream_instant` (migration 0047): the instant a property's ISO-8601 string names, or
NULL for anything else, never an error; and the tsquery the match set is built from parses
whatever lexemes Postgres made."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from pipeline.retrieval.store.matchset import tsquery_text

pytestmark = pytest.mark.stack


@pytest.mark.parametrize(("text", "instant"), [
    ("2024-01-15", datetime(2024, 1, 15, tzinfo=UTC)),
    ("2024-01-15T01:00:00+02:00", datetime(2024, 1, 14, 23, 0, tzinfo=UTC)),
    ("2024-01-15 10:30-0530", datetime(2024, 1, 15, 16, 0, tzinfo=UTC)),
    ("2024-01-15T10:30:15.25Z", datetime(2024, 1, 15, 10, 30, 15, 250000, tzinfo=UTC)),
    ("2024-02-29", datetime(2024, 2, 29, tzinfo=UTC)),
    ("2023-02-29", None), ("2024-13-01", None), ("2024-04-31", None), ("0000-01-01", None),
    ("2024-01-15T24:00", None), ("yesterday", None), ("", None), ("2024-1-5", None),
])
def test_instants(db: psycopg.Connection[Any], text: str, instant: datetime | None) -> None:
    row = db.execute("SELECT brainstream_instant(%s)", (text,)).fetchone()
    assert row is not None and row[0] == instant


def test_the_match_sets_tsquery_parses_any_lexeme(db: psycopg.Connection[Any]) -> None:
    text = "O'Neil's path C:\\temp\\x & (y | z) !w <-> 'q' harbor:*"
    row = db.execute("SELECT tsvector_to_array(to_tsvector('english', %s))", (text,)).fetchone()
    assert row is not None
    lexemes = list(row[0])
    query = tsquery_text(lexemes)
    matched = db.execute("SELECT to_tsvector('english', %s) @@ %s::tsquery",
                         (text, query)).fetchone()
    assert matched is not None and matched[0] is True
