"""Issue 12, item 5: operations on conversation memory, two tenants: purge of soft-deleted
sessions (and of messages a delete hid in a session revived since) past the retention, as the
operator runs it; verify's counts per namespace, pending extractors and invariants; the
status and metrics figures for extractor and summary lag. (The replay of memory events is
covered by tests/pipeline/test_replay.py, whose corpus carries conversations.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import RawRecord, ingest_options
from pipeline.ingest.store.events import PgEventStore
from pipeline.ops.exporter import StateCollector
from pipeline.ops.memory import check_memory, read_memory_backlog, verify_memory
from pipeline.settings import Settings
from tests.memory.memutil import add, message, messages_of, session_put, session_row
from tests.pipelineutil import envelope, ingest, pipeline_env

pytestmark = pytest.mark.stack


def _age_deletion(settings: Settings, ns: uuid.UUID, sid: str, days: int) -> None:
    """Pretend the session's deletion (and what it hid) happened `days` ago."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        for table in ("messages", "summaries"):
            conn.execute(
                f"UPDATE {table} t SET deleted_at = now() - make_interval(days => %s)"
                " FROM sessions s WHERE t.session_pk = s.id AND s.namespace_id = %s"
                " AND s.session_id = %s AND t.deleted_at IS NOT NULL", (days, ns, sid))
        conn.execute("UPDATE sessions SET deleted_at = now() - make_interval(days => %s)"
                     " WHERE namespace_id = %s AND session_id = %s AND deleted_at IS NOT NULL",
                     (days, ns, sid))


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args],
                          env=pipeline_env(settings), capture_output=True, text=True,
                          timeout=120, check=False)


def test_purge_removes_what_was_deleted_past_the_retention(catalog: Settings) -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    kept_msg = message("still here after the revival")
    events = [add(a, "old", message("one"), message("two")),
              add(a, "revived", message("hidden by the delete")),
              add(a, "recent", message("deleted only today")),
              add(b, "old", message("B's session of the same name"))]
    events += [envelope("session.delete", a, {"session_id": sid})
               for sid in ("old", "revived", "recent")]
    events += [session_put(a, "revived"), add(a, "revived", kept_msg)]
    ingest(catalog, events)
    _age_deletion(catalog, a, "old", 40)
    _age_deletion(catalog, a, "revived", 40)

    done = _cli(catalog, "memory", "purge")  # the retention setting: 30 days
    assert done.returncode == 0, done.stderr
    assert "purged" in done.stdout
    assert session_row(catalog, a, "old") is None
    revived = messages_of(catalog, a, "revived", visible=False)
    assert [m["uuid"] for m in revived] == [kept_msg["uuid"]]
    assert session_row(catalog, a, "recent") is not None  # deleted today: kept
    assert len(messages_of(catalog, a, "recent", visible=False)) == 1
    assert len(messages_of(catalog, b, "old")) == 1  # the other tenant untouched

    done = _cli(catalog, "memory", "purge", "--older-than", "0s")
    assert done.returncode == 0, done.stderr
    assert session_row(catalog, a, "recent") is None
    assert session_row(catalog, b, "old") is not None


@contextmanager
def _snapshot(settings: Settings) -> Iterator[psycopg.Connection[Any]]:
    """A repeatable-read transaction, rolled back at the end: what it reads changes only by
    its own writes (`_apply`), never by the workers', which never see them either."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        try:
            yield conn
        finally:
            conn.rollback()


def _apply(conn: psycopg.Connection[Any], settings: Settings,
           events: list[dict[str, Any]]) -> None:
    records = [RawRecord("t", 0, i, None, json.dumps(e).encode()) for i, e in enumerate(events)]
    outcome = apply_batch(PgEventStore(conn), records, ingest_options(settings))
    assert not outcome.dead, [d.error.to_dict() for d in outcome.dead]


def test_verify_counts_per_namespace_and_reports_pending_extractors(catalog: Settings) -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    events = [add(a, "s1", message("a1"), message("a2")), add(a, "s2", message("a3")),
              add(b, "s1", message("b1")), envelope("session.delete", a, {"session_id": "s2"})]
    with _snapshot(catalog) as conn:
        _apply(conn, catalog, events)
        conn.execute("UPDATE message_extraction SET status = 'failed' WHERE namespace_id = %s"
                     " AND extractor = 'embed'", (b,))
        check = check_memory(conn)
    counts = {n.namespace: n for n in check.namespaces}
    got_a, got_b = counts[str(a)], counts[str(b)]
    assert (got_a.sessions, got_a.deleted_sessions, got_a.messages, got_a.hidden_messages) == (
        1, 1, 2, 1)
    assert (got_b.sessions, got_b.messages) == (1, 1)
    # every visible message still waits for an extractor; B's one gave up on embedding
    assert (got_a.pending_messages, got_b.pending_messages) == (2, 1)
    assert (got_a.failed_messages, got_b.failed_messages) == (0, 1)
    assert check.clean


def test_verify_exits_1_on_a_broken_invariant(catalog: Settings) -> None:
    ns = uuid.uuid4()
    ingest(catalog, [add(ns, "s1", message("m1"))])
    with psycopg.connect(catalog.effective_postgres_dsn) as conn:
        conn.execute("DELETE FROM message_extraction WHERE namespace_id = %s", (ns,))
    try:
        assert verify_memory(catalog).missing_extractor_rows == 3
        done = _cli(catalog, "memory", "verify")
        assert done.returncode == 1
        assert str(ns) in done.stdout
    finally:
        with psycopg.connect(catalog.effective_postgres_dsn) as conn:
            conn.execute("DELETE FROM sessions WHERE namespace_id = %s", (ns,))
    assert verify_memory(catalog).missing_extractor_rows == 0


def test_status_and_metrics_show_extractor_and_summary_lag(catalog: Settings) -> None:
    ns, window = uuid.uuid4(), catalog.memory_window
    n = window + 8
    with _snapshot(catalog) as conn:
        before = read_memory_backlog(conn, window)
        _apply(conn, catalog, [add(ns, "long", *[message(f"turn {i}") for i in range(n)])])
        after = read_memory_backlog(conn, window)
    pending = {e.extractor: e.pending - b.pending
               for e, b in zip(after.extractors, before.extractors, strict=True)}
    assert pending == {"token": n, "embed": n, "entities": n}
    assert after.summary_lag_messages - before.summary_lag_messages == 8
    assert after.summary_lag_max >= 8
    assert after.summariser_pending == before.summariser_pending + 1

    # the exporter publishes the same figures at scrape time, one sample per extractor
    families = {f.name: f for f in StateCollector(catalog, lag=False).collect()}
    extractors = {s.labels["extractor"] for s in
                  families["brainstream_memory_extractor_lag_seconds"].samples}
    assert extractors == {"token", "embed", "entities"}
    scopes = {s.labels["scope"] for s in
              families["brainstream_memory_summary_lag_messages"].samples}
    assert scopes == {"total", "max"}
    assert "brainstream_memory_summariser_pending" in families
