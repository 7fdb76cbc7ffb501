"""The memory metrics' summary lag (`pipeline/ops/memory.py: read_memory_backlog`, read at every
scrape) reads only the sessions past the window, not every session: real Postgres, the plan
of the very statement it runs, on a database of thousands of sessions with a few behind."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from pipeline.ops.memory import SUMMARY_LAG, read_memory_backlog
from tests.pipeline.conftest import db

pytestmark = pytest.mark.stack
__all__ = ["db"]
WINDOW = 12


def test_summary_lag_reads_only_the_sessions_past_the_window(
        db: psycopg.Connection[Any]) -> None:
    ns, other = uuid.uuid4(), uuid.uuid4()
    # 4,000 sessions within the window, a deleted one far behind, and five behind it
    db.execute("INSERT INTO sessions (id, namespace_id, session_id, last_seq, summary_seq)"
               " SELECT gen_random_uuid(), %s, 's' || i, 20 + i %% 13, 20 FROM"
               " generate_series(1, 4000) AS i", (ns,))
    db.execute("INSERT INTO sessions (id, namespace_id, session_id, last_seq, summary_seq,"
               " deleted_at) VALUES (gen_random_uuid(), %s, 'gone', 500, 0, now())", (ns,))
    behind = [(ns, 30), (ns, 13), (other, 100), (other, 40), (ns, 12 + 1)]
    for i, (space, unsummarised) in enumerate(behind):
        db.execute("INSERT INTO sessions (id, namespace_id, session_id, last_seq, summary_seq)"
                   " VALUES (gen_random_uuid(), %s, %s, %s, 0)",
                   (space, f"behind-{i}", unsummarised))
    db.execute("ANALYZE sessions")

    backlog = read_memory_backlog(db, WINDOW)
    debts = [n - WINDOW for _, n in behind]
    assert (backlog.summary_lag_messages, backlog.summary_lag_max) == (sum(debts), max(debts))

    plan = "\n".join(str(r[0]) for r in db.execute(
        "EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF, TIMING OFF) " + SUMMARY_LAG,
        {"w": WINDOW}).fetchall())
    assert "Seq Scan" not in plan, plan
    assert "sessions_unsummarised" in plan, plan
