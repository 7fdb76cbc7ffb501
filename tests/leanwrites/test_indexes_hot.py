"""Migration 0034: the written tables carry exactly the indexes docs/architecture.md
(its indexes table) lists as kept (each with the statement that uses it), and
the extraction stage's claim is a HOT update."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pipeline.entities.store import extraction
from pipeline.settings import Settings
from tests.leanwrites.conftest import many_rows

pytestmark = pytest.mark.stack

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
TABLES = ("objects", "object_embeddings", "outbox", "links")


def _documented() -> dict[str, set[str]]:
    """table -> the indexes the doc's table marks as kept."""
    kept: dict[str, set[str]] = {t: set() for t in TABLES}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] in kept and re.fullmatch(r"\w+", cells[1]) \
                and cells[4].startswith("yes"):
            kept[cells[0]].add(cells[1])
    return kept


def test_the_written_tables_have_the_documented_indexes(db: psycopg.Connection[Any]) -> None:
    rows = db.execute("SELECT tablename, indexname FROM pg_indexes WHERE schemaname = 'public'"
                      " AND tablename = ANY(%s)", (list(TABLES),)).fetchall()
    actual: dict[str, set[str]] = {t: set() for t in TABLES}
    for table, index in rows:
        actual[table].add(index)
    assert actual == _documented()


def test_the_extraction_claim_is_a_hot_update(lean: Settings,
                                              db: psycopg.Connection[Any]) -> None:
    """A claim of a full batch on a table of many pending rows: every lease is a HOT update."""
    ns = uuid.uuid4()
    many_rows(db, ns)
    with db.transaction():
        claimed = extraction.claim(db, recount=False, lease=60.0, roots=None,
                                   limit=lean.extract_batch_size)
        upd, hot = db.execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables"
                              " WHERE relname = 'entity_extraction'").fetchone() or (0, 0)
    assert len(claimed) == lean.extract_batch_size
    assert upd == hot == len(claimed)
