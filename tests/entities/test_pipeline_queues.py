"""Extraction on its own queue (`extract`, its own worker process): a backlog of extraction
never holds a new document's embedding behind it, and the backlog is extracted once its worker
runs again, in both tenants, nothing lost or doubled."""

from __future__ import annotations

import uuid

import redis

from pipeline.settings import Settings
from tests.entities.stageutil import put, q
from tests.entities.test_pipeline import PEOPLE, check_consistent, text
from tests.pipelineutil import Proc, Publisher, wait_for


def _status(settings: Settings, ids: list[uuid.UUID]) -> tuple[int, int]:
    """(rows embedded, rows extracted) among these objects' rows."""
    embedded, extracted = q(
        settings, "SELECT count(*) FILTER (WHERE e.embed_status = 'done'),"
        " count(*) FILTER (WHERE x.status = 'done') FROM objects o"
        " JOIN object_embeddings e ON e.id = o.id"
        " LEFT JOIN entity_extraction x ON x.row_id = o.id"
        " WHERE o.id = ANY(%s) OR o.parent_id = ANY(%s)", ids, ids)[0]
    return int(embedded), int(extracted)


def _rows(settings: Settings, ids: list[uuid.UUID]) -> int:
    return int(q(settings, "SELECT count(*) FROM objects WHERE id = ANY(%s)"
                 " OR parent_id = ANY(%s)", ids, ids)[0][0])


def test_embedding_proceeds_while_an_extraction_backlog_waits(
        procs: dict[str, Proc], publisher: Publisher, catalog: Settings) -> None:
    ns, other = uuid.uuid4(), uuid.uuid4()
    broker = redis.Redis.from_url(catalog.effective_redis_url)
    backlog = [uuid.uuid4() for _ in range(48)]
    later = [uuid.uuid4() for _ in range(8)]
    procs["extract"].stop()  # extraction paused: its tasks wait in the `extract` queue
    try:
        for i, oid in enumerate(backlog):
            publisher.send(put(ns if i % 2 else other, oid, title=f"Letter from {PEOPLE[i % 8]}",
                               content=text(i)), str(oid))
        wait_for(lambda: _rows(catalog, backlog) >= len(backlog)
                 and q(catalog, "SELECT count(*) FROM entity_extraction x JOIN objects o"
                       " ON o.id = x.row_id WHERE (o.id = ANY(%s) OR o.parent_id = ANY(%s))"
                       " AND x.status = 'pending'", backlog, backlog)[0][0]
                 == _rows(catalog, backlog),
                 what="the backlog written, every row waiting for extraction")
        wait_for(lambda: broker.llen("extract") > 0, what="extraction tasks queued")
        # Published after the backlog: embedded while the backlog is still queued.
        for i, oid in enumerate(later):
            publisher.send(put(other if i % 2 else ns, oid, title=f"Memo {i}",
                               content=text(i + 100)), str(oid))
        wait_for(lambda: (n := _rows(catalog, later)) >= len(later)
                 and _status(catalog, later)[0] == n, what="the later documents embedded")
        assert _status(catalog, backlog)[1] == 0, "extraction ran while paused"
        assert _status(catalog, later)[1] == 0
        assert broker.llen("extract") > 0, "the extraction backlog drained before embedding"
    finally:
        procs["extract"].start()
    everything = backlog + later
    wait_for(lambda: _status(catalog, everything)[1] == _rows(catalog, everything),
             timeout=90, what="the backlog extracted once the extraction worker runs")
    for tenant in (ns, other):
        check_consistent(catalog, tenant)
    # Each tenant's entities name only its own rows.
    assert q(catalog, "SELECT count(*) FROM mentions m JOIN objects o ON o.id = m.row_id"
             " WHERE m.namespace_id <> o.namespace_id") == [(0,)]
