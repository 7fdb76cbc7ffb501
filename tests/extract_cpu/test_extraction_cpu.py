"""What cut the extraction stage's and the proposal pass's CPU (issue 11; docs/entities.md,
"Extraction's CPU") keeps what they did, on real Postgres:

- one batch's new entities go in with one statement: the insert triggers of `entities` (the
  PPR snapshot log, the proposal queue) fire once per batch and namespace, not once per entity,
  and log or queue exactly that namespace's entities, name vectors included; aliases likewise;
- the trigram indexes of names and aliases keep no GIN pending list (migration 0037), so what
  the stage just wrote never makes the pass's trigram lookups read a list;
- the stage's name lookups are not stuck with a plan made while the tables were empty.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from pipeline.entities.ids import entity_id
from pipeline.entities.stage import ExtractionStage
from pipeline.entities.store import writes as entities_sql
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.entities.stageutil import CapsExtractor, apply, put, q
from tests.pipelineutil import wait_for
from tests.stackutil import fresh_database

pytestmark = pytest.mark.stack

TRIGRAM_INDEXES = ("entities_norm_trgm", "entities_ns_norm_trgm", "entity_aliases_norm_trgm",
                   "entity_aliases_ns_norm_trgm")


@pytest.fixture(scope="module")
def xdb(stack_settings: Settings) -> Settings:
    """A migrated database of this module's own: the session's pipeline never extracts it."""
    return fresh_database(stack_settings, "extractcpu", example_catalog=True)


@pytest.fixture(scope="module")
def xpool(xdb: Settings) -> Iterator[ConnectionPool]:
    pool = make_pool(xdb, max_size=4)
    yield pool
    pool.close()


def test_one_batch_creates_each_tenants_entities_in_one_statement(
        xdb: Settings, xpool: ConnectionPool) -> None:
    ns1, ns2, a, b = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    text = "met Babbage and Menabrea in Turin, said Ada"
    apply(xdb, [put(ns1, a, title="about Lovelace", content=text),
                put(ns2, b, title="about Somerville", content=text)])
    stats = ExtractionStage(xdb, xpool, CapsExtractor()).run([a, b])
    assert stats.failed == 0 and stats.extracted == 4  # two roots, one part each: one batch
    created = {ns: {eid: (name, norm) for eid, name, norm in q(
        xdb, "SELECT id, name, norm FROM entities WHERE namespace_id = %s", ns)}
        for ns in (ns1, ns2)}
    shared = {"babbage", "menabrea", "turin", "ada"}
    assert {norm for _, norm in created[ns1].values()} == shared | {"lovelace"}
    assert {norm for _, norm in created[ns2].values()} == shared | {"somerville"}
    for ns, found in created.items():  # the same name in two tenants: two entities
        assert set(found) == {entity_id(ns, norm) for _, norm in found.values()}
    # The insert triggers fired once for the batch: per namespace, one log row for the insert,
    # naming exactly that namespace's new entities (there was one row per entity). Their
    # `part_count` was right at the insert: the recount changed none, so its update trigger
    # logged nothing (a second row per namespace before).
    logged = q(xdb, "SELECT namespace_id, ids FROM ppr_snapshot_log WHERE kind = 'entity'"
               " AND namespace_id = ANY(%s) ORDER BY seq", [ns1, ns2])
    for ns in (ns1, ns2):
        assert [set(ids) for n, ids in logged if n == ns] == [set(created[ns])]
    counted = q(xdb, "SELECT e.id, e.part_count, count(DISTINCT m.row_id) FROM entities e"
                " JOIN mentions m ON m.entity_id = e.id WHERE e.namespace_id = ANY(%s)"
                " GROUP BY e.id, e.part_count", [ns1, ns2])
    assert len(counted) == sum(map(len, created.values()))
    assert all(stored == live for _, stored, live in counted)
    queued = q(xdb, "SELECT namespace_id, entity_id FROM entity_proposal_queue"
               " WHERE namespace_id = ANY(%s)", [ns1, ns2])
    assert sorted(queued) == sorted((ns, eid) for ns, found in created.items() for eid in found)
    # No name vector yet: the proposal pass writes them (tests/entities/test_stage.py).
    assert q(xdb, "SELECT count(*) FROM entity_name_vectors WHERE namespace_id = ANY(%s)",
             [ns1, ns2]) == [(0,)]
    # Aliases: every tenant's own, on its own entities.
    for ns, found in created.items():
        aliased = q(xdb, "SELECT entity_id, norm FROM entity_aliases WHERE namespace_id = %s", ns)
        assert {eid for eid, _ in aliased} == set(found)
        assert {norm for _, norm in aliased} >= {norm for _, norm in found.values()}


def test_trigram_indexes_keep_no_pending_list(xdb: Settings) -> None:
    options = dict(q(xdb, "SELECT c.relname, c.reloptions FROM pg_class c"
                     " WHERE c.relname = ANY(%s)", list(TRIGRAM_INDEXES)))
    assert set(options) == set(TRIGRAM_INDEXES)
    for name in TRIGRAM_INDEXES:
        assert "fastupdate=off" in (options[name] or []), name


def test_name_lookups_follow_the_tables_as_they_grow(xdb: Settings) -> None:
    """The name lookups are never prepared, even on a connection that prepares every statement
    at once: a generic plan kept from the first, empty-table calls would stay in use as the
    tables grow (it scanned `entities` once per looked-up name). Their answers are the same."""
    ns = uuid.uuid4()
    with psycopg.connect(xdb.effective_postgres_dsn, autocommit=True,
                         prepare_threshold=0) as conn:
        for _ in range(8):  # on an empty namespace, as a new deployment starts
            assert entities_sql.by_norm(conn, [(ns, "nobody", "")]) == {}
        names = [f"name {i}" for i in range(300)]
        conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label)"
                     " SELECT gen_random_uuid(), %s, n, n, 'NAME' FROM unnest(%s::text[]) n",
                     (ns, names))
        conn.execute("INSERT INTO entity_aliases (namespace_id, norm, alias, entity_id, source)"
                     " SELECT namespace_id, norm || ' alias', name, id, 'surface' FROM entities"
                     " WHERE namespace_id = %s", (ns,))
        conn.execute("ANALYZE entities, entity_aliases")
        wanted = [(ns, f"name {i} alias", "") for i in range(0, 300, 10)]
        found = entities_sql.by_norm(conn, wanted)
        assert len(found) == len(wanted)
        prepared = conn.execute("SELECT count(*) FROM pg_prepared_statements"
                                " WHERE statement LIKE '%%entity_aliases a JOIN unnest%%'"
                                " AND statement NOT LIKE '%%pg_prepared_statements%%'"
                                ).fetchone()
        assert prepared is not None and prepared[0] == 0


def _unanalyzed(settings: Settings, ns: uuid.UUID, count: int) -> None:
    """`count` entities, each with an alias, in one namespace, on tables autovacuum leaves alone
    (it would race the test), and the statistics system told about them."""
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        for table in ("entities", "entity_aliases"):
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label)"
                     " SELECT gen_random_uuid(), %s, 'name ' || i, 'name ' || i, 'NAME'"
                     " FROM generate_series(1, %s) i", (ns, count))
        conn.execute("INSERT INTO entity_aliases (namespace_id, norm, alias, entity_id, source)"
                     " SELECT namespace_id, norm || ' alias', name, id, 'surface' FROM entities"
                     " WHERE namespace_id = %s", (ns,))
        conn.execute("SELECT pg_stat_force_next_flush()")


def _changes(settings: Settings) -> dict[str, int]:
    return {str(name): int(n) for name, n in q(
        settings, "SELECT relname, n_mod_since_analyze FROM pg_stat_user_tables"
        " WHERE relname IN ('entities', 'entity_aliases')")}


def test_tables_a_first_load_grew_are_analyzed_once_and_a_busy_one_is_skipped(
        stack_settings: Settings) -> None:
    """A namespace's first load grows the entity tables faster than autovacuum looks; without
    statistics the pass's name lookups read the whole namespace per name (25x the CPU).
    `analyze_stale` gives them statistics once, not again while they stay fresh, and skips a
    table another session is analyzing rather than wait for it."""
    db = fresh_database(stack_settings, "stalestats")
    ns = uuid.uuid4()
    _unanalyzed(db, ns, 300)
    wait_for(lambda: all(n >= 300 for n in _changes(db).values()) or None, timeout=30,
             what="the insert counted by the statistics system")
    with psycopg.connect(db.effective_postgres_dsn, autocommit=True) as conn:
        # below the threshold nothing is analyzed
        assert entities_sql.analyze_stale(conn, min_changes=10_000) == []
        busy = psycopg.connect(db.effective_postgres_dsn)
        try:
            busy.execute("LOCK TABLE entity_aliases IN SHARE UPDATE EXCLUSIVE MODE")
            assert entities_sql.analyze_stale(conn) == ["entities"]
        finally:
            busy.close()
        assert entities_sql.analyze_stale(conn) == ["entity_aliases"]
        assert entities_sql.analyze_stale(conn) == []
    stats = q(db, "SELECT tablename, n_distinct FROM pg_stats WHERE attname = 'namespace_id'"
              " AND tablename IN ('entities', 'entity_aliases') ORDER BY 1")
    # one namespace holds every row: the planner now knows `namespace_id = $1` selects it all
    assert stats == [("entities", 1.0), ("entity_aliases", 1.0)]
