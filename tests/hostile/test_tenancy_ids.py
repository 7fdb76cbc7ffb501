"""Issue 10, item 8: one tenant cannot take over another's object or part rows by their ids.

Part ids are derived within the namespace, and every object upsert checks the owner of a row
it meets: a put that would write over another namespace's row is dead-lettered
`id_owned_by_other_namespace` and the row is left untouched.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from pipeline.domain.chunking import part_id
from pipeline.settings import Settings
from tests.pipelineutil import Proc, Publisher, indexed, put, read_topic, wait_for

pytestmark = pytest.mark.stack

CODE = "id_owned_by_other_namespace"
# How part ids were derived before the namespace took part: anyone knowing a parent's id could
# compute its part ids.
_LEGACY_PART_NAMESPACE = uuid.UUID("6f1c1d5e-3b1a-5c7e-9d0b-2a6e8f4c9b10")


def _legacy_part_id(parent: str, position: int) -> uuid.UUID:
    return uuid.uuid5(_LEGACY_PART_NAMESPACE, f"{parent}/{position}")


def _rows(settings: Settings, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        return conn.execute(sql, params).fetchall()


def _codes(settings: Settings, marker: str) -> list[str]:
    return sorted(h["brainstream.error.code"]
                  for _, value, h in read_topic(settings, settings.topic_dlq, timeout_ms=1500)
                  if marker.encode() in value)


def _note(ns: uuid.UUID, secret: str, **data: Any) -> dict[str, Any]:
    return put(ns, kind="note", title="Board memo",
               content=f"The {secret} acquisition closes in May.\n\nNobody outside may know.",
               **data)


@pytest.mark.usefixtures("sql_postings")  # asserts on the SQL postings
def test_a_squatted_part_id_never_captures_another_tenants_text(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    ns_a, ns_b = uuid.uuid4(), uuid.uuid4()
    secret = f"zorbex{uuid.uuid4().hex[:8]}"
    parent = str(uuid.uuid4())  # A's object id, known to B
    squat = put(ns_b, id=str(_legacy_part_id(parent, 0)), kind="company", title="Squatter")
    publisher.send(squat, parent)  # one partition: B's squat is applied before A's put
    memo = _note(ns_a, secret, id=parent)
    publisher.send(memo, parent)
    wait_for(lambda: indexed(catalog, parent), what="A's memo")
    # B's row is as B wrote it; A's parts are A's, under ids derived within A's namespace
    assert _rows(catalog, "SELECT namespace_id, title, content, parent_id FROM objects"
                 " WHERE id = %s", squat["data"]["id"]) == [(ns_b, "Squatter", None, None)]
    parts = _rows(catalog, "SELECT id, namespace_id, position FROM objects WHERE parent_id = %s"
                  " ORDER BY position", parent)
    assert parts and all(ns == ns_a for _, ns, _ in parts)
    assert [pid for pid, _, _ in parts] == [part_id(ns_a, uuid.UUID(parent), pos)
                                            for _, _, pos in parts]
    # nothing of B's holds A's words, so B's searches cannot learn them
    assert _rows(catalog, "SELECT count(*) FROM objects WHERE namespace_id = %s"
                 " AND content LIKE %s", ns_b, f"%{secret}%") == [(0,)]
    assert _rows(catalog, "SELECT count(*) FROM search_postings WHERE namespace_id = %s"
                 " AND lexeme = %s", ns_b, secret) == [(0,)]


def test_puts_colliding_with_another_tenants_ids_are_dead_lettered(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    ns_a, ns_b = uuid.uuid4(), uuid.uuid4()
    secret = f"quillon{uuid.uuid4().hex[:8]}"
    parent = str(uuid.uuid4())
    key = parent  # every event on one partition, in order
    publisher.send(_note(ns_a, secret, id=parent), key)
    own = put(ns_b, kind="note", title="B's own parent")
    publisher.send(own, key)
    wait_for(lambda: indexed(catalog, parent) and indexed(catalog, own["data"]["id"]),
             what="A's memo and B's parent")
    before = _rows(catalog, "SELECT id, namespace_id, title, content, parent_id, updated_at"
                   " FROM objects WHERE id = %s OR parent_id = %s ORDER BY id", parent, parent)
    (a_part,), = _rows(catalog, "SELECT id FROM objects WHERE parent_id = %s AND position = 0",
                       parent)
    marker = f"takeover-{uuid.uuid4().hex}"
    attempts = [
        put(ns_b, id=parent, kind="note", title=marker),  # A's object id
        put(ns_b, id=str(a_part), kind="note", title=marker),  # A's part id, as an object
        put(ns_b, id=str(a_part), kind="note", parent_id=own["data"]["id"], position=0,
            content=marker),  # A's part id, as an explicit part of B's own parent
    ]
    goods = []
    for attempt in attempts:
        publisher.send(attempt, key)
        good = put(ns_b, title=f"good after a takeover attempt {len(goods)}")
        publisher.send(good, key)
        goods.append(good["data"]["id"])
    wait_for(lambda: all(indexed(catalog, g) for g in goods), what="B's good events")
    assert wait_for(lambda: (codes := _codes(catalog, marker)) and len(codes) >= 3 and codes,
                    what="the dead letters") == [CODE] * 3
    after = _rows(catalog, "SELECT id, namespace_id, title, content, parent_id, updated_at"
                  " FROM objects WHERE id = %s OR parent_id = %s ORDER BY id", parent, parent)
    assert after == before


def test_the_upsert_leaves_a_foreign_row_alone_even_under_a_namespaced_id(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    """B knows A's namespace id too and squats the id A's first part will get: A's put cannot
    write its part, so it is refused whole (nothing of it lands under B's row)."""
    ns_a, ns_b = uuid.uuid4(), uuid.uuid4()
    secret = f"vantor{uuid.uuid4().hex[:8]}"
    parent = str(uuid.uuid4())
    squat = put(ns_b, id=str(part_id(ns_a, uuid.UUID(parent), 0)), kind="company",
                title="Squatter")
    publisher.send(squat, parent)
    memo = _note(ns_a, secret, id=parent)
    publisher.send(memo, parent)
    after = put(ns_a, title="A's next object")
    publisher.send(after, parent)
    wait_for(lambda: indexed(catalog, after["data"]["id"]), what="A's next object")
    assert wait_for(lambda: _codes(catalog, secret), what="the refused memo") == [CODE]
    assert _rows(catalog, "SELECT namespace_id, title, content, parent_id FROM objects"
                 " WHERE id = %s", squat["data"]["id"]) == [(ns_b, "Squatter", None, None)]
    assert _rows(catalog, "SELECT count(*) FROM objects WHERE id = %s OR parent_id = %s",
                 parent, parent) == [(0,)]


@pytest.mark.usefixtures("sql_postings")  # asserts on the SQL postings
def test_migration_0011_returns_taken_over_parts_to_their_owner(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    """The repair half of migration 0011, on a row the old upsert let B take over (made here
    by hand: the write path can no longer make one)."""
    from pipeline.ops.migrations import discover

    ns_a, ns_b = uuid.uuid4(), uuid.uuid4()
    secret = f"morvane{uuid.uuid4().hex[:8]}"
    parent = str(uuid.uuid4())
    publisher.send(_note(ns_a, secret, id=parent), parent)
    publisher.send(put(ns_b, kind="company", title="B's own"), parent)
    wait_for(lambda: indexed(catalog, parent), what="A's memo")
    (taken,), = _rows(catalog, "SELECT id FROM objects WHERE parent_id = %s AND position = 0",
                      parent)
    sql = next(m for m in discover() if m.version == 11).text
    repair = sql[sql.index("CREATE TEMP TABLE"):]
    with psycopg.connect(catalog.effective_postgres_dsn) as conn:
        conn.execute("UPDATE objects SET namespace_id = %s WHERE id = %s", (ns_b, taken))
        conn.execute("INSERT INTO search_vocab (namespace_id, lexeme) VALUES (%s, %s)",
                     (ns_b, secret))
        conn.commit()
        # a part of another namespace's parent is not searchable: B learnt A's words through
        # its vocabulary (what the trigram channel matches query words against)
        assert conn.execute("SELECT count(*) FROM search_postings WHERE row_id = %s",
                            (taken,)).fetchone() == (0,)
        conn.execute(repair.encode())
        conn.commit()
    assert _rows(catalog, "SELECT namespace_id FROM objects WHERE id = %s", taken) == [(ns_a,)]
    for table in ("search_postings", "search_vocab"):
        assert _rows(catalog, f"SELECT count(*) FROM {table} WHERE namespace_id = %s"
                     " AND lexeme = %s", ns_b, secret) == [(0,)]
    assert _rows(catalog, "SELECT count(*) FROM search_postings WHERE namespace_id = %s"
                 " AND row_id = %s", ns_a, taken)[0][0] > 0
    assert _rows(catalog, "SELECT count(*) FROM outbox WHERE aggregate_id = %s"
                 " AND op = 'node_sync'", taken) == [(1,)]
