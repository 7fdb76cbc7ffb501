"""apply_batch's runs of puts (pipeline/ingest/bulk.py) on a real Postgres database: what the
set-based statements write is what the event-by-event path writes, and what they do not cover
(re-puts, stale versions, refusals, duplicates) comes out as it did event by event."""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from pipeline.domain.chunking import part_id
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import BatchOutcome, IngestOptions, RawRecord
from pipeline.ingest.store.events import PgEventStore
from tests.pipelineutil import envelope, put

pytestmark = pytest.mark.stack

OPTIONS = IngestOptions(chunk_max_tokens=20, chunk_overlap_tokens=0)
LONG = "\n\n".join(f"Paragraph {i} talks about topic {i} in some detail here." for i in range(6))
T0 = 1_700_000_000_000


def _apply(conn: psycopg.Connection[Any], events: list[dict[str, Any]],
           stamps: list[int | None] | None = None, options: IngestOptions = OPTIONS
           ) -> BatchOutcome:
    stamps = stamps or [None] * len(events)
    records = [RawRecord("t", 0, i, None, json.dumps(e).encode(), (), stamp)
               for i, (e, stamp) in enumerate(zip(events, stamps, strict=True))]
    with conn.transaction():
        return apply_batch(PgEventStore(conn), records, options)


def _state(conn: psycopg.Connection[Any], ns: uuid.UUID) -> dict[str, Any]:
    """Everything the puts of `ns` wrote, without the ids of generated rows."""
    return {
        "objects": conn.execute(
            "SELECT o.id::text, o.parent_id::text, o.position, o.title, o.content,"
            " o.context_title, o.index_text_hash, o.source_version, o.event_id,"
            " (extract(epoch FROM o.created_at) * 1000)::bigint,"
            " (extract(epoch FROM o.updated_at) * 1000)::bigint, e.embed_status,"
            " x.status FROM objects o JOIN object_embeddings e ON e.id = o.id"
            " JOIN entity_extraction x ON x.row_id = o.id"
            " WHERE o.namespace_id = %s ORDER BY o.id", (ns,)).fetchall(),
        "ledger": conn.execute("SELECT event_id, outcome FROM processed_events"
                               " WHERE namespace_id = %s ORDER BY event_id", (ns,)).fetchall(),
        "outbox": [r[0] for r in conn.execute(
            "SELECT aggregate_id::text FROM outbox WHERE namespace_id = %s ORDER BY id",
            (ns,)).fetchall()],
        "lexical": conn.execute("SELECT count(DISTINCT root_id) FROM lexical_log"
                                " WHERE namespace_id = %s", (ns,)).fetchone(),
    }


def _puts(ns: uuid.UUID, n: int) -> list[dict[str, Any]]:
    return [put(ns, id=str(uuid.uuid5(ns, str(i))), title=f"doc {i}",
                content=LONG if i % 2 == 0 else None) | {"id": f"event-{i}"}
            for i in range(n)]


def test_a_run_writes_what_one_by_one_writes(db: psycopg.Connection[Any]) -> None:
    """The same puts (same ids, times, event ids) in two namespaces, once as a run and once
    event by event: the rows, their times, the ledger, the outbox and the queues are equal."""
    stamps: list[int | None] = [T0 + 1000 * i for i in range(7)]
    stamps[3] = None  # no record time: the transaction's, as before
    together, alone = uuid.uuid4(), uuid.uuid4()
    outcome = _apply(db, _puts(together, 7), stamps)
    single = _apply(db, _puts(alone, 7), stamps, replace(OPTIONS, min_run=10**9))
    assert (outcome.applied, outcome.outbox_rows, len(outcome.embed_roots)) == (7, 7, 7)
    assert (single.applied, single.outbox_rows) == (7, 7)

    def relative(state: dict[str, Any], ns: uuid.UUID) -> dict[str, Any]:
        names = {str(uuid.uuid5(ns, str(i))): f"doc{i}" for i in range(7)}
        names |= {str(part_id(ns, uuid.uuid5(ns, str(i)), p)): f"doc{i}/{p}"
                  for i in range(7) for p in range(10)}
        def stamp(ms: int) -> int | str:
            return ms if ms < T0 + 10**6 else "now"  # the transaction's time

        objects = sorted((names[r[0]], names.get(r[1]), *r[2:9], stamp(r[9]), stamp(r[10]),
                          *r[11:]) for r in state["objects"])
        return {**state, "objects": objects, "outbox": [names[o] for o in state["outbox"]]}

    assert relative(_state(db, together), together) == relative(_state(db, alone), alone)


def test_a_run_keeps_the_outcomes_of_what_it_does_not_cover(
        db: psycopg.Connection[Any]) -> None:
    ns, other = uuid.uuid4(), uuid.uuid4()
    existing = put(ns, title="Old title", content=LONG) | {"version": 2}
    theirs = put(other, title="Theirs")
    _apply(db, [existing, theirs])
    oid = existing["data"]["id"]
    fresh = [put(ns, title=f"new {i}") for i in range(3)]
    events = [
        fresh[0],
        put(ns, id=oid, title="New title") | {"version": 3},  # a re-put: one by one
        fresh[1],
        put(ns, id=theirs["data"]["id"], title="refused"),  # another namespace's id
        envelope("object.put", ns, {"kind": "bad kind!", "title": "x"}),  # refused by parsing
        put(ns, id=oid, title="older") | {"version": 1},  # the same object again: a new run
        existing,  # a duplicate of the first put (same event id)
        fresh[2],
    ]
    outcome = _apply(db, events)
    assert [d.error.code for d in outcome.dead] == ["id_owned_by_other_namespace",
                                                    "invalid_payload"]
    assert (outcome.applied, outcome.stale, outcome.duplicates) == (4, 1, 1)
    assert db.execute("SELECT title, source_version FROM objects WHERE id = %s",
                      (oid,)).fetchone() == ("New title", 3)
    assert db.execute("SELECT DISTINCT context_title FROM objects WHERE parent_id = %s",
                      (oid,)).fetchall() == []  # re-put without content: its parts are gone
    assert db.execute("SELECT title FROM objects WHERE id = %s",
                      (theirs["data"]["id"],)).fetchone() == ("Theirs",)
    ledger = dict(db.execute("SELECT event_id, outcome FROM processed_events"
                             " WHERE namespace_id = %s", (ns,)).fetchall())
    assert ledger == {existing["id"]: "applied", events[1]["id"]: "applied",
                      events[5]["id"]: "stale", **{e["id"]: "applied" for e in fresh}}
    # again, whole: every event is a duplicate now, the refused ones refused again
    again = _apply(db, events)
    assert (again.applied, again.duplicates, len(again.dead)) == (0, 6, 2)


def test_a_part_id_another_namespace_holds_sends_the_run_one_by_one(
        db: psycopg.Connection[Any]) -> None:
    """The upsert refuses the run (a derived part id is another namespace's): the run's
    savepoint is rolled back and its events go one by one, only that put dead-lettered."""
    ns, other = uuid.uuid4(), uuid.uuid4()
    victim = put(ns, title="Chunked", content=LONG)
    squatter = put(other, id=str(part_id(ns, uuid.UUID(victim["data"]["id"]), 1)),
                   title="squatter")
    _apply(db, [squatter])
    before, after = put(ns, title="before"), put(ns, title="after")
    outcome = _apply(db, [before, victim, after], [T0, T0 + 1, T0 + 2])
    assert [d.error.code for d in outcome.dead] == ["id_owned_by_other_namespace"]
    assert outcome.applied == 2
    assert {r[0] for r in db.execute("SELECT id::text FROM objects WHERE namespace_id = %s",
                                     (ns,)).fetchall()} == {before["data"]["id"],
                                                            after["data"]["id"]}
    assert [r[0] for r in db.execute("SELECT aggregate_id::text FROM outbox"
                                     " WHERE namespace_id = %s ORDER BY id", (ns,)).fetchall()
            ] == [before["data"]["id"], after["data"]["id"]]
    assert db.execute("SELECT count(*) FROM processed_events WHERE namespace_id = %s",
                      (ns,)).fetchone() == (2,)
    assert [r[0] for r in db.execute(
        "SELECT (extract(epoch FROM created_at) * 1000)::bigint FROM objects"
        " WHERE namespace_id = %s ORDER BY created_at", (ns,)).fetchall()] == [T0, T0 + 2]


def _random_batches(rng: random.Random, ns: uuid.UUID, n: int) -> list[list[dict[str, Any]]]:
    """`n` events over a few objects of `ns` (ids derived from it, event ids shared by every
    namespace): new puts, re-puts with and without content, stale versions, duplicates, soft
    deletes, puts of unknown-kind-like names, puts of ids another namespace holds; in batches
    of 1-25."""
    keys = [f"k{i}" for i in range(12)]
    version = dict.fromkeys(keys, 0)
    sent: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for i in range(n):
        roll = rng.random()
        key = rng.choice(keys)
        oid = str(uuid.uuid5(ns, key))
        if roll < 0.1 and sent:
            events.append(rng.choice(sent))  # a duplicate delivery
            continue
        if roll < 0.2:
            event = envelope("object.soft_delete", ns, {"id": oid},
                             version=version[key] + 1)
        elif roll < 0.25:
            event = put(ns, id=str(uuid.uuid5(OTHER, key)), title=f"theirs {i}")
        elif roll < 0.3:
            event = put(ns, id=oid, title=f"stale {i}") | {"version": max(version[key] - 1, 0)}
        else:
            event = put(ns, id=oid, title=f"{key} v{i}",
                        content=LONG[: rng.randrange(40, len(LONG))] if rng.random() < 0.5
                        else None) | {"version": version[key] + 1}
        event["id"] = f"e{i}"
        if "version" in event:
            version[key] = max(version[key], event["version"])
        sent.append(event)
        events.append(event)
    out: list[list[dict[str, Any]]] = []
    while events:
        size = rng.randrange(1, 26)
        out.append(events[:size])
        events = events[size:]
    return out


OTHER = uuid.UUID("00000000-0000-0000-0000-00000000a0a0")


@pytest.mark.parametrize("seed", range(4))
def test_random_batches_come_out_as_one_by_one(db: psycopg.Connection[Any], seed: int) -> None:
    """Random mixes of puts, re-puts, stale versions, duplicates, deletes and refused ids,
    applied in the same batches with runs and event by event into two namespaces: the same
    rows, ledger, dead letters (in order) and each aggregate's outbox rows (in order)."""
    together, alone = uuid.uuid4(), uuid.uuid4()
    # ids another namespace holds: refused in both
    _apply(db, [put(OTHER, id=str(uuid.uuid5(OTHER, f"k{i}")), title="theirs")
                for i in range(12)])
    results = {}
    for ns, options in ((together, OPTIONS), (alone, replace(OPTIONS, min_run=10**9))):
        dead: list[tuple[str | None, str]] = []
        counts = [0, 0, 0]
        for chunk in _random_batches(random.Random(seed), ns, 150):
            got = _apply(db, chunk, options=options)
            dead += [(d.event_id, d.error.code) for d in got.dead]
            counts = [counts[0] + got.applied, counts[1] + got.duplicates, counts[2] + got.stale]
        names = {str(uuid.uuid5(ns, f"k{i}")): f"k{i}" for i in range(12)}
        objects = sorted(
            (names.get(r[0], r[0]) if r[1] is None else f"{names[r[1]]}/{r[2]}",
             r[3], r[4], r[5], r[6], r[7])
            for r in db.execute(
                "SELECT id::text, parent_id::text, position, title, content, source_version,"
                " event_id, deleted_at IS NOT NULL FROM objects WHERE namespace_id = %s",
                (ns,)).fetchall())
        outbox: dict[str, list[str]] = {}
        for aggregate, op in db.execute("SELECT aggregate_id::text, op FROM outbox"
                                        " WHERE namespace_id = %s ORDER BY id", (ns,)):
            outbox.setdefault(names[aggregate], []).append(op)
        results[ns] = {
            "objects": objects, "dead": dead, "counts": counts, "outbox": outbox,
            "ledger": sorted(db.execute("SELECT event_id, outcome FROM processed_events"
                                        " WHERE namespace_id = %s", (ns,)).fetchall())}
    assert results[together] == results[alone]
    assert results[together]["counts"][0] > 50  # the mix applied things, not only refusals
