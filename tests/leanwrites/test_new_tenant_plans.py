"""Reads by id stay reads by id for a tenant the statistics have not seen yet. Statistics taken
before a tenant's first ingest estimate its namespace at about one row; a query asking for rows
by id *and* namespace was then planned as a scan of the namespace (an `objects_ns_*` index)
probing the ids, a cost that grows with the tenant: the lexical writer's load read every object
of the namespace per batch. Real
Postgres: a young database analysed (five tenants of one object), tenant B loaded after it
(3,000 objects); plans and answers of both read."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from pipeline.lexical.changes import _LOAD, load_documents
from pipeline.retrieval.store.paths import _ENDPOINTS
from pipeline.retrieval.store.ppr_snapshot import (
    _ALIASES_OF,
    _ENTITY_STATES,
    _MENTIONS_OF,
    _ROW_STATES,
)
from tests.pipeline.conftest import db

pytestmark = pytest.mark.stack
__all__ = ["db"]


def _objects(db: psycopg.Connection[Any], ns: uuid.UUID, count: int) -> list[uuid.UUID]:
    return [r[0] for r in db.execute(
        "INSERT INTO objects (id, namespace_id, kind, title, content, index_text_hash)"
        " SELECT gen_random_uuid(), %s, 'note', 'title ' || i, 'content ' || i, md5(i::text)"
        " FROM generate_series(1, %s) AS i RETURNING id", (ns, count)).fetchall()]


def _entities(db: psycopg.Connection[Any], ns: uuid.UUID, rows: list[uuid.UUID], per: int = 1
              ) -> list[uuid.UUID]:
    """An entity per row, mentioned `per` times by that row."""
    ids = [uuid.uuid4() for _ in rows]
    with db.cursor() as cur:
        cur.executemany("INSERT INTO entities (id, namespace_id, name, norm, label)"
                        " VALUES (%s, %s, %s, %s, 'NAME')",
                        [(e, ns, f"Name {e}", f"name {e}") for e in ids])
        cur.executemany("INSERT INTO mentions (row_id, field, start_pos, end_pos, namespace_id,"
                        " entity_id, label, text) VALUES (%s, 'content', %s, %s, %s, %s, 'NAME',"
                        " 'Name')", [(r, 100 * i + 10 * k, 100 * i + 10 * k + 4, ns, e)
                                     for i, (r, e) in enumerate(zip(rows, ids, strict=True))
                                     for k in range(per)])
    return ids


def _plan(db: psycopg.Connection[Any], query: Any, params: dict[str, Any]) -> str:
    db.execute("SET plan_cache_mode = force_custom_plan")
    return "\n".join(str(r[0]) for r in db.execute(
        b"EXPLAIN (COSTS OFF) " + (query.as_bytes(db) if hasattr(query, "as_bytes")
                                   else query.encode()), params).fetchall())


def test_reads_by_id_of_a_tenant_loaded_after_the_statistics(
        db: psycopg.Connection[Any]) -> None:
    # a young database, analysed: five tenants of one object each, entities named thrice
    early = [uuid.uuid4() for _ in range(5)]
    a = early[0]
    a_rows = [r for ns in early for r in _objects(db, ns, 1)]
    for ns, r in zip(early, a_rows, strict=True):
        _entities(db, ns, [r, r], per=3)
    db.execute("ANALYZE objects; ANALYZE entities; ANALYZE mentions")
    b = uuid.uuid4()
    b_rows = _objects(db, b, 3000)  # after the statistics: B is "about one row"
    b_entities = _entities(db, b, b_rows[-60:])  # named by the namespace's last rows
    db.execute("UPDATE objects SET deleted_at = now() WHERE id = %s", (b_rows[-1],))

    # the lexical writer's load: the roots asked, of the namespace asked only
    docs = load_documents(db, b, b_rows[:10] + a_rows)
    assert {d.root_id for d in docs} == set(b_rows[:10])
    assert load_documents(db, a, b_rows[:3]) == []
    plan = _plan(db, _LOAD, {"ns": b, "roots": b_rows[:10]})
    assert "objects_pkey" in plan and "objects_ns" not in plan, plan

    # /v1/paths' endpoint lookup: by id too
    plan = _plan(db, _ENDPOINTS, {"ids": b_rows[:5] + b_entities[:5], "ns": b})
    assert "objects_ns" not in plan and "entities_ns" not in plan, plan

    # the PPR snapshots' reads by key (the API's refresh of a tenant's snapshot)
    keys = {"ns": b, "rows": b_rows[:5], "objs": b_rows[5:8], "ids": b_entities[:5]}
    for query in (_ROW_STATES, _ENTITY_STATES, _MENTIONS_OF, _ALIASES_OF):
        plan = _plan(db, query, keys)
        assert "_ns" not in plan, plan
