"""The postings functions of migration 0009 on the real database: a rebuild through
`brainstream_rebuild_postings` gives, row for row, the postings the trigger keeps (and both equal
an independent reference from each row's tsvector) for a namespace with parts, soft-deleted and
revived objects; it repairs what a bulk load without the trigger left out, touches no other
namespace, and `brainstream_row_postings` is inlined into the query that calls it."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from pipeline.domain.chunking import explicit_part_id
from tests.pipelineutil import envelope, put
from tests.search.searchref import apply_events, load_rows, searchable

pytestmark = pytest.mark.stack

Posting = tuple[uuid.UUID, str, uuid.UUID, int, int]


def _stored(db: psycopg.Connection[Any], ns: uuid.UUID | None = None) -> set[Posting]:
    """The postings in the table: of one namespace, or all."""
    return set(db.execute(
        "SELECT namespace_id, lexeme, row_id, tf, doc_len FROM search_postings"
        " WHERE %(ns)s::uuid IS NULL OR namespace_id = %(ns)s", {"ns": ns}).fetchall())


def _expected(db: psycopg.Connection[Any], ns: uuid.UUID) -> set[Posting]:
    """The postings the namespace should have: its searchable rows' lexemes, from Python."""
    rows = load_rows(db)
    return {(ns, lexeme, rid, tf, rows[rid].doc_len)
            for rid in searchable(rows, ns) for lexeme, tf in rows[rid].tf.items()}


def _rebuild(db: psycopg.Connection[Any], ns: uuid.UUID | None) -> int:
    row = db.execute("SELECT brainstream_rebuild_postings(%s)", (ns,)).fetchone()
    assert row is not None
    return int(row[0])


def _long(word: str, n: int) -> str:
    return " ".join(f"{word}{i} cargo" for i in range(n))


def test_rebuild_agrees_with_the_trigger_row_for_row(db: psycopg.Connection[Any]) -> None:
    """After each step the trigger's postings equal the reference; a rebuild then deletes and
    re-inserts exactly the same rows, and the trigger carries on from them in the next step."""
    ns, other = uuid.uuid4(), uuid.uuid4()
    chunked = put(ns, title="Harbor logbook", content=_long("entry", 60))
    revived = put(ns, title="Customs ledger", content=_long("tariff", 40))
    bare = put(ns, title="Crane inventory", summary="cranes and berths")
    holder = put(ns, title="Berth plan", summary="berth plan for the quay")
    holder_id = holder["data"]["id"]
    explicit = envelope("object.put", ns, {"kind": "note", "parent_id": holder_id,
                                           "position": 3, "content": "explicit quay part"})
    steps: list[list[dict[str, Any]]] = [
        [chunked, revived, bare, holder, explicit,
         put(other, title="Elsewhere", content=_long("other", 30))],
        [envelope("object.soft_delete", ns, {"id": revived["data"]["id"]}),
         envelope("object.soft_delete", ns, {"id": chunked["data"]["id"]})],
        [put(ns, id=revived["data"]["id"], title="Customs ledger revived",
             content=_long("duty", 45))],
        [put(ns, id=bare["data"]["id"], title="Crane inventory", content=_long("crane", 50))],
        [envelope("object.soft_delete", ns,
                  {"id": str(explicit_part_id(ns, uuid.UUID(holder_id), 3))})],
    ]
    for number, events in enumerate(steps):
        apply_events(db, events)
        by_trigger = _stored(db, ns)
        assert by_trigger == _expected(db, ns), f"step {number}"
        untouched = _stored(db, other)
        assert _rebuild(db, ns) == len(by_trigger)
        assert _stored(db, ns) == by_trigger, f"step {number}"
        assert _stored(db, other) == untouched
    # every kind of row took part: a deleted parent, a revived one with new parts, an object
    # that gained parts, and one searchable again after its only part went
    rows = load_rows(db)
    live = searchable(rows, ns)
    assert rows[uuid.UUID(chunked["data"]["id"])].deleted
    assert uuid.UUID(holder_id) in live
    assert {rows[rid].parent_id for rid in live} >= {uuid.UUID(revived["data"]["id"]),
                                                     uuid.UUID(bare["data"]["id"])}


def test_rebuild_repairs_a_load_that_bypassed_the_trigger(db: psycopg.Connection[Any]) -> None:
    """What bench/query does: rows written with the insert trigger off have no postings
    until the rebuild; drifted and stray postings of other namespaces go with a full rebuild."""
    ns, other = uuid.uuid4(), uuid.uuid4()
    apply_events(db, [put(other, title="Kept", content=_long("kept", 30))])
    db.execute("ALTER TABLE objects DISABLE TRIGGER objects_postings_insert")
    try:
        apply_events(db, [put(ns, title="Bulk loaded", content=_long("bulk", 50)),
                          put(ns, title="Bulk bare", summary="no content here")])
    finally:
        db.execute("ALTER TABLE objects ENABLE TRIGGER objects_postings_insert")
    assert _stored(db, ns) == set()
    expected = _expected(db, ns)
    assert expected
    assert _rebuild(db, ns) == len(expected)
    assert _stored(db, ns) == expected

    victim = next(iter(_stored(db, other)))
    db.execute("UPDATE search_postings SET tf = tf + 1 WHERE namespace_id = %s AND lexeme = %s"
               " AND row_id = %s", (other, victim[1], victim[2]))
    db.execute("INSERT INTO search_postings VALUES (%s, 'stray', %s, 1, 1)",
               (other, uuid.uuid4()))
    namespaces = [r[0] for r in db.execute("SELECT DISTINCT namespace_id FROM objects")]
    expected_all = set().union(*(_expected(db, n) for n in namespaces))
    assert _stored(db) != expected_all
    assert _rebuild(db, None) == len(expected_all)
    assert _stored(db) == expected_all


def test_row_postings_is_inlined(db: psycopg.Connection[Any]) -> None:
    """The planner replaces the function call by its body (no function scan of its own), so a
    bulk rebuild plans like the hand-written join it replaced."""
    plan = "\n".join(str(r[0]) for r in db.execute(
        "EXPLAIN SELECT p.* FROM objects o, brainstream_row_postings(o) AS p").fetchall())
    assert "brainstream_row_postings" not in plan
    assert "unnest" in plan
