"""apply_batch on a real Postgres database, without the other processes: the write path's
decisions (chunking, re-chunking, re-embedding, conflicts) observed row by row."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest

from pipeline.domain.chunking import explicit_part_id
from pipeline.domain.kinds import load_catalog
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import IngestOptions, RawRecord
from pipeline.ingest.store.catalog import apply_catalog
from pipeline.ingest.store.events import PgEventStore
from tests.pipelineutil import envelope, put

pytestmark = pytest.mark.stack

OPTIONS = IngestOptions(chunk_max_tokens=20, chunk_overlap_tokens=0)


def _apply(conn: psycopg.Connection[Any], *events: dict[str, Any] | bytes) -> Any:
    records = [RawRecord("t", 0, i, None, e if isinstance(e, bytes) else json.dumps(e).encode())
               for i, e in enumerate(events)]
    with conn.transaction():
        return apply_batch(PgEventStore(conn), records, OPTIONS)


def _parts(conn: psycopg.Connection[Any], parent: str) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT o.position, o.content, e.embed_status FROM objects o"
                        " JOIN object_embeddings e ON e.id = o.id WHERE o.parent_id = %s"
                        " AND o.deleted_at IS NULL ORDER BY o.position", (parent,)).fetchall()


LONG = "\n\n".join(f"Paragraph {i} talks about topic {i} in some detail here." for i in range(6))


def test_open_mode_accepts_any_kind_and_chunks(db: psycopg.Connection[Any]) -> None:
    ns = uuid.uuid4()
    event = put(ns, kind="anything_goes", title="Open", content=LONG)
    outcome = _apply(db, event)
    assert outcome.applied == 1 and not outcome.dead
    parts = _parts(db, event["data"]["id"])
    assert len(parts) >= 3
    assert [p[0] for p in parts] == list(range(len(parts)))
    assert "".join(p[1] for p in parts).count("Paragraph") >= 6


def test_rechunk_replaces_stale_parts_and_keeps_unchanged_embeddings(
        db: psycopg.Connection[Any]) -> None:
    ns = uuid.uuid4()
    first = put(ns, title="Doc", content=LONG)
    oid = first["data"]["id"]
    _apply(db, first)
    # pretend the worker embedded everything
    db.execute("UPDATE object_embeddings SET embedding = array_fill(0.1::real, ARRAY[256])::vector,"
               " embedded_hash = index_text_hash, embed_status = 'done'"
               " WHERE root_id = %s", (oid,))
    before = _parts(db, oid)
    shorter = "\n\n".join(LONG.split("\n\n")[:2])
    second = put(ns, id=oid, title="Doc", content=shorter)
    _apply(db, second)
    after = _parts(db, oid)
    assert 0 < len(after) < len(before)
    assert db.execute("SELECT count(*) FROM objects WHERE parent_id = %s", (oid,)).fetchone() \
        == (len(after),)  # stale parts are gone, not hidden
    # part 0 kept its text: its embedding is kept, not recomputed
    assert after[0][1] == before[0][1] and after[0][2] == "done"
    # the parent's index text changed (content): it must be re-embedded
    assert db.execute("SELECT embed_status FROM object_embeddings WHERE id = %s",
                      (oid,)).fetchone() == ("pending",)
    # an identical re-put (new event id) changes no embedding status at all
    db.execute("UPDATE object_embeddings SET embedding = array_fill(0.1::real, ARRAY[256])::vector,"
               " embedded_hash = index_text_hash, embed_status = 'done'"
               " WHERE root_id = %s", (oid,))
    _apply(db, put(ns, id=oid, title="Doc", content=shorter))
    assert {row[0] for row in db.execute(
        "SELECT embed_status FROM object_embeddings WHERE root_id = %s",
        (oid,)).fetchall()} == {"done"}


def test_explicit_parts_are_kept_as_sent(db: psycopg.Connection[Any]) -> None:
    ns = uuid.uuid4()
    parent = put(ns, title="Parent without content")
    pid = parent["data"]["id"]
    part = envelope("object.put", ns, {"kind": "company", "parent_id": pid, "position": 7,
                                       "content": "An explicit part, exactly as sent."})
    outcome = _apply(db, parent, part)
    assert outcome.applied == 2
    row = db.execute("SELECT id, position, content FROM objects WHERE parent_id = %s",
                     (pid,)).fetchone()
    assert row == (explicit_part_id(ns, uuid.UUID(pid), 7), 7, "An explicit part, exactly as sent.")
    _apply(db, put(ns, id=pid, title="Parent without content"))  # re-put keeps the part
    assert _parts(db, pid) == [(7, "An explicit part, exactly as sent.", "pending")]


def test_database_dependent_rejections(db: psycopg.Connection[Any]) -> None:
    ns, other = uuid.uuid4(), uuid.uuid4()
    taken = put(ns, title="Mine")
    _apply(db, taken)
    outcome = _apply(
        db,
        put(other, id=taken["data"]["id"], title="Theirs"),
        envelope("object.put", ns, {"kind": "c", "parent_id": str(uuid.uuid4()), "position": 0,
                                    "content": "orphan"}),
        envelope("object.soft_delete", ns, {"id": str(uuid.uuid4())}),
        envelope("link.delete", ns, {"from": taken["data"]["id"], "to": str(uuid.uuid4()),
                                     "relation_type": "knows"}),
        put(ns, title="still applied"),
    )
    assert [d.error.code for d in outcome.dead] == [
        "id_owned_by_other_namespace", "parent_not_found", "object_not_found", "link_not_found"]
    assert outcome.applied == 1
    assert db.execute("SELECT title FROM objects WHERE id = %s",
                      (taken["data"]["id"],)).fetchone() == ("Mine",)
    # rejected events are not recorded as processed: a fixed re-drive can still apply them
    assert db.execute("SELECT count(*) FROM processed_events").fetchone() == (2,)


def test_rejected_events_leave_their_neighbours_times_and_outbox_rows(
        db: psycopg.Connection[Any]) -> None:
    """The event time and the outbox rows ride with the savepoints (PgEventStore): a rejected
    event's rollback drops its rows and keeps the time it set, so a later event of the same
    time is stamped with it; the applied events' rows are written in their order."""
    ns, other = uuid.uuid4(), uuid.uuid4()
    taken = put(other, title="Theirs")
    _apply(db, taken)
    events = [put(ns, title="first"), put(ns, id=taken["data"]["id"], title="refused"),
              put(ns, title="same time as the refused one"), put(ns, title="last")]
    stamps = [1_700_000_000_000, 1_700_000_001_000, 1_700_000_001_000, 1_700_000_002_000]
    records = [RawRecord("t", 0, i, None, json.dumps(e).encode(), (), stamp)
               for i, (e, stamp) in enumerate(zip(events, stamps, strict=True))]
    with db.transaction():
        outcome = apply_batch(PgEventStore(db), records, OPTIONS)
    assert [d.error.code for d in outcome.dead] == ["id_owned_by_other_namespace"]
    applied = [events[i]["data"]["id"] for i in (0, 2, 3)]
    times = dict(db.execute("SELECT id::text, (extract(epoch FROM created_at) * 1000)::bigint"
                            " FROM objects WHERE namespace_id = %s", (ns,)).fetchall())
    assert times == {oid: stamps[i] for oid, i in zip(applied, (0, 2, 3), strict=True)}
    rows = db.execute("SELECT aggregate_id::text FROM outbox WHERE namespace_id = %s"
                      " ORDER BY id", (ns,)).fetchall()
    assert [r[0] for r in rows] == applied


def test_closed_catalog_validates_puts(db: psycopg.Connection[Any]) -> None:
    apply_catalog(db, load_catalog(
        "kinds:\n  - kind: deal\n    fields:\n"
        "      - {name: stage, type: string, required: true}\n"))
    ns = uuid.uuid4()
    outcome = _apply(db, put(ns, kind="deal", properties={"stage": "won"}),
                     put(ns, kind="deal", properties={}),
                     put(ns, kind="company"))
    assert outcome.applied == 1
    assert [(d.error.code, d.error.field) for d in outcome.dead] == [
        ("missing_required_field", "data.properties.stage"), ("unknown_kind", "data.kind")]
