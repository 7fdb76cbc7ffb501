"""`brainstream purge`: soft-deleted objects past the retention go, with parts and links."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from pipeline.domain.errors import InvalidInput
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import RawRecord, ingest_options
from pipeline.ingest.store.events import PgEventStore
from pipeline.ops.purge import parse_age, purge
from tests.pipelineutil import envelope, put
from tests.stackutil import make_settings

pytestmark = pytest.mark.stack


def _apply(conn: psycopg.Connection[Any], *events: dict[str, Any]) -> None:
    records = [RawRecord("t", 0, i, None, json.dumps(e).encode()) for i, e in enumerate(events)]
    with conn.transaction():
        outcome = apply_batch(PgEventStore(conn), records, ingest_options(make_settings()))
    assert not outcome.dead


def test_parse_age() -> None:
    assert parse_age("30d") == timedelta(days=30)
    assert parse_age("12h") == timedelta(hours=12)
    with pytest.raises(InvalidInput):
        parse_age("soon")


def test_purge_removes_old_soft_deletes_only(db: psycopg.Connection[Any]) -> None:
    ns = uuid.uuid4()
    old, recent, live = (put(ns, title=t, content="One part.\n\nTwo parts.")
                         for t in ("old", "recent", "live"))
    ids = {e["data"]["title"]: e["data"]["id"] for e in (old, recent, live)}
    link = envelope("link.put", ns, {"from": ids["live"], "to": ids["old"],
                                     "relation_type": "knows"})
    _apply(db, old, recent, live, link,
           envelope("object.soft_delete", ns, {"id": ids["old"]}),
           envelope("object.soft_delete", ns, {"id": ids["recent"]}))
    db.execute("UPDATE objects SET deleted_at = now() - interval '40 days'"
               " WHERE id = %s OR parent_id = %s", (ids["old"], ids["old"]))
    settings = make_settings(postgres_dsn=db.info.dsn)
    result = purge(settings, timedelta(days=30))
    assert (result.objects, result.links) == (1, 1) and result.parts >= 1
    remaining = {r[0] for r in db.execute("SELECT title FROM objects WHERE parent_id IS NULL")}
    assert remaining == {"recent", "live"}
    assert db.execute("SELECT count(*) FROM objects WHERE parent_id = %s",
                      (ids["old"],)).fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM links").fetchone() == (0,)
    # the graph hears about it, and the ledger still knows the old events
    assert db.execute("SELECT count(*) FROM outbox WHERE aggregate_id = %s AND done_at IS NULL",
                      (ids["old"],)).fetchone()[0] >= 1
    assert db.execute("SELECT count(*) FROM processed_events WHERE event_id = %s",
                      (old["id"],)).fetchone() == (1,)
    assert purge(settings, timedelta(days=30)).objects == 0  # idempotent
    # the histories go with their object and link; the live object's stays
    assert db.execute("SELECT count(*) FROM object_versions WHERE object_id = %s",
                      (ids["old"],)).fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM link_versions").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM object_versions WHERE object_id = %s",
                      (ids["live"],)).fetchone() == (1,)


def test_purge_erases_a_retired_link_with_its_versions(db: psycopg.Connection[Any]) -> None:
    ns = uuid.uuid4()
    a, b, c = (put(ns, title=t) for t in ("a", "b", "c"))
    ia, ib, ic = (e["data"]["id"] for e in (a, b, c))
    _apply(db, a, b, c,
           envelope("link.put", ns, {"from": ia, "to": ib, "relation_type": "knows"}),
           envelope("link.delete", ns, {"from": ia, "to": ib, "relation_type": "knows"}),
           # starts in the future: its row is deleted until then, its version must stay
           envelope("link.put", ns, {"from": ia, "to": ic, "relation_type": "knows",
                                     "valid_from": "2999-01-01T00:00:00Z"}))
    db.execute("UPDATE links SET deleted_at = now() - interval '40 days'")
    result = purge(make_settings(postgres_dsn=db.info.dsn), timedelta(days=30))
    assert result.links == 1
    left = db.execute("SELECT DISTINCT to_id::text FROM link_versions").fetchall()
    assert left == [(ic,)]
