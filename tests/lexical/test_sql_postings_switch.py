"""The SQL BM25 postings and vocabulary follow LEXICAL_ENGINE (docs/operations.md, the section
of that name): the migration step every start runs turns them off under tantivy (nothing
written, tables emptied) and rebuilds them under postgres, rows of every tenant each searchable
in its own namespace, without losing a write that overlaps the switch; an API on the SQL engine
over a database that does not keep them says so in /readyz and `status` and answers from its
other channels."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from pipeline.domain.read_model import Filters
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import RawRecord, ingest_options
from pipeline.ingest.store.events import PgEventStore
from pipeline.lexical.postings_switch import NOT_MAINTAINED, postings_maintained
from pipeline.ops.migrations import apply_migrations
from pipeline.ops.status import collect, render
from pipeline.postgres.pool import make_async_pool
from pipeline.retrieval.store.search import PgPartSearcher
from pipeline.settings import Settings
from tests.apiutil import ApiTenant, api_client, ok
from tests.pipelineutil import apply_only, ingest, put, wait_for
from tests.stackutil import fresh_database

pytestmark = pytest.mark.stack

# Every searchable row's postings as the trigger writes them, against what the table holds:
# both directions empty means the postings are exactly right.
_DRIFT = ("SELECT (SELECT count(*) FROM (SELECT p.* FROM objects o, brainstream_row_postings(o) p"
          "   WHERE brainstream_searchable(o) EXCEPT SELECT * FROM search_postings) missing),"
          " (SELECT count(*) FROM (SELECT * FROM search_postings EXCEPT SELECT p.*"
          "   FROM objects o, brainstream_row_postings(o) p"
          "   WHERE brainstream_searchable(o)) extra)")


def _engine(settings: Settings, engine: str) -> Settings:
    return settings.model_copy(update={"lexical_engine": engine})


def _switch(settings: Settings, engine: str) -> list[str]:
    """`brainstream migrate` with LEXICAL_ENGINE=engine; what it reported."""
    said: list[str] = []
    apply_migrations(_engine(settings, engine), report=said.append)
    return said


def _one(settings: Settings, query: str, *args: object) -> Any:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute(query, args).fetchone()
    assert row is not None
    return row[0] if len(row) == 1 else tuple(row)


def _counts(settings: Settings) -> tuple[int, int, int]:
    return _one(settings, "SELECT (SELECT count(*) FROM search_postings),"
                " (SELECT count(*) FROM search_vocab), (SELECT count(*) FROM search_vocab_pending)")


def _bm25(settings: Settings, ns: uuid.UUID, query: str) -> set[uuid.UUID]:
    """Rows the SQL BM25 channel finds for `query` in `ns` (roots and parts)."""
    async def run() -> set[uuid.UUID]:
        pool = await make_async_pool(settings, max_size=1)
        try:
            hits = await PgPartSearcher(pool, stats_ttl=0).search_lexical(
                ns, query, Filters(), [], 100)
        finally:
            await pool.close()
        return {h.id for h in hits}
    return asyncio.run(run())


def _note(ns: uuid.UUID, word: str) -> dict[str, Any]:
    return put(ns, kind="note", title="Harbour log",
               content=f"The {word} was unloaded at dawn.\n\nCustoms cleared the {word} by noon.")


def _roots_and_parts(settings: Settings, root: str) -> set[uuid.UUID]:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        rows = conn.execute("SELECT id FROM objects WHERE id = %(r)s OR parent_id = %(r)s",
                            {"r": root}).fetchall()
    return {r[0] for r in rows}


@pytest.fixture()
def fresh(stack_settings: Settings) -> Settings:
    """A new database migrated as the default engine (tantivy) migrates it."""
    settings = fresh_database(stack_settings, "postings")
    assert settings.lexical_engine == "tantivy"
    return settings


def test_tantivy_writes_no_postings_and_postgres_rebuilds_them_per_tenant(
        fresh: Settings) -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    word_a, word_b = f"zorvat{uuid.uuid4().hex[:6]}", f"quillon{uuid.uuid4().hex[:6]}"
    note_a, note_b = _note(a, word_a), _note(b, word_b)
    apply_only(fresh, [note_a, note_b, _note(b, word_a)])  # B holds A's word too
    with psycopg.connect(fresh.effective_postgres_dsn) as conn:
        assert not postings_maintained(conn)
    assert _counts(fresh) == (0, 0, 0)

    said = _switch(fresh, "postgres")
    assert len(said) == 1 and "postings on" in said[0], said
    with psycopg.connect(fresh.effective_postgres_dsn) as conn:
        assert postings_maintained(conn)
    assert _one(fresh, _DRIFT) == (0, 0)
    for ns in (a, b):  # both tenants' rows came back, with their vocabulary
        assert _one(fresh, "SELECT count(*) FROM search_postings WHERE namespace_id = %s", ns)
        assert _one(fresh, "SELECT count(*) FROM search_vocab WHERE namespace_id = %s"
                    " AND lexeme = %s", ns, word_a) == 1
    found_a = _bm25(fresh, a, word_a)
    assert found_a and found_a <= _roots_and_parts(fresh, note_a["data"]["id"])
    assert _bm25(fresh, a, word_b) == set()  # B's word is not A's
    assert _bm25(fresh, b, word_b) <= _roots_and_parts(fresh, note_b["data"]["id"])
    assert _bm25(fresh, b, word_b) and found_a.isdisjoint(_bm25(fresh, b, word_a))
    # a new write under postgres gets its postings in its own transaction
    later = _note(a, "gyrfalcon")
    apply_only(fresh, [later])
    assert _bm25(fresh, a, "gyrfalcon")

    assert _switch(fresh, "postgres") == []  # aligned already: nothing done, nothing said
    said = _switch(fresh, "tantivy")
    assert len(said) == 1 and "postings off" in said[0], said
    assert _counts(fresh) == (0, 0, 0)
    apply_only(fresh, [_note(b, "ocelot")])
    assert _counts(fresh) == (0, 0, 0)
    assert _bm25(fresh, b, "ocelot") == set()
    # one trigger switched back on by hand (an interrupted bulk load): settled at the next start
    with psycopg.connect(fresh.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE objects ENABLE TRIGGER objects_postings_insert")
    apply_only(fresh, [_note(b, "margay")])
    assert _counts(fresh) != (0, 0, 0)
    assert len(_switch(fresh, "tantivy")) == 1
    assert _counts(fresh) == (0, 0, 0)


def test_processes_starting_at_once_switch_once(fresh: Settings) -> None:
    apply_only(fresh, [_note(uuid.uuid4(), "kestrel")])
    said: list[str] = []
    threads = [threading.Thread(target=lambda: said.extend(_switch(fresh, "postgres")))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(said) == 1, said
    assert _one(fresh, _DRIFT) == (0, 0)


def test_a_write_overlapping_the_switch_keeps_its_postings(fresh: Settings) -> None:
    """A writer whose transaction started while the postings were off and commits while the
    switch waits, and writers that keep writing during the rebuild: afterwards every searchable
    row has exactly its postings."""
    ns = uuid.uuid4()
    apply_only(fresh, [_note(ns, f"w{i}alpaca") for i in range(20)])
    inflight = _note(ns, "inflightbison")
    stop = threading.Event()
    written: list[str] = []

    def keep_writing() -> None:
        i = 0
        while not stop.is_set():
            event = _note(ns, f"s{i}stream")
            apply_only(fresh, [event])
            written.append(event["data"]["id"])
            i += 1

    with psycopg.connect(fresh.effective_postgres_dsn) as writer:
        records = [RawRecord("t", 0, 0, None, json.dumps(inflight).encode())]
        outcome = apply_batch(PgEventStore(writer), records, ingest_options(fresh))
        assert not outcome.dead
        switcher = threading.Thread(target=_switch, args=(fresh, "postgres"))
        switcher.start()
        with psycopg.connect(fresh.effective_postgres_dsn, autocommit=True) as watch:
            wait_for(lambda: watch.execute(
                "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
                " WHERE NOT l.granted AND c.relname = 'objects'").fetchone() == (1,),
                timeout=20, what="the switch to wait for the writer in flight")
        streamer = threading.Thread(target=keep_writing)
        streamer.start()  # these wait behind the switch, then write with the triggers on
        writer.commit()
    switcher.join()
    wait_for(lambda: len(written) >= 3, timeout=20, what="writes after the switch")
    stop.set()
    streamer.join()
    assert _one(fresh, _DRIFT) == (0, 0)
    assert _bm25(fresh, ns, "inflightbison")
    assert _bm25(fresh, ns, "s0stream")


@pytest.fixture()
def two_tenants(catalog: Settings) -> Iterator[tuple[ApiTenant, ApiTenant, str, dict[str, str]]]:
    """Two tenants' notes written through the whole write path into the session database, which
    keeps no SQL postings (the session runs the tantivy default); switched back afterwards."""
    apply_migrations(catalog)
    a, b = (ApiTenant(uuid.uuid4(), f"key-{uuid.uuid4().hex[:8]}") for _ in range(2))
    word = f"tamarin{uuid.uuid4().hex[:6]}"
    notes = {t.key: _note(t.namespace, word) for t in (a, b)}
    ingest(catalog, list(notes.values()))
    try:
        yield a, b, word, {key: note["data"]["id"] for key, note in notes.items()}
    finally:
        apply_migrations(catalog)


def test_an_api_on_the_sql_engine_says_the_postings_are_off_and_still_answers(
        catalog: Settings,
        two_tenants: tuple[ApiTenant, ApiTenant, str, dict[str, str]]) -> None:
    a, b, word, note_of = two_tenants
    on_sql = _engine(catalog, "postgres")
    with api_client(on_sql, [a, b]) as client:
        ready = client.get("/readyz")
        assert ready.status_code == 503
        body = ready.json()
        assert body["dependencies"]["sql_postings"] == "down"
        assert body["reasons"] == {"sql_postings": NOT_MAINTAINED}
        # no 500: the lexical channels find nothing, the dense one answers
        page = ok(client.post("/v1/search", json={"query": word}, headers=a.headers))
        assert page["objects"]
        exact = ok(client.post("/v1/find_exact", json={"query": word}, headers=a.headers))
        assert exact["objects"] == []
        report = collect(on_sql)
        assert report.sql_postings["problem"] == NOT_MAINTAINED and not report.healthy
        assert NOT_MAINTAINED in render(report)

        _switch(catalog, "postgres")  # `brainstream migrate` with the API's engine
        assert client.get("/readyz").json()["dependencies"]["sql_postings"] == "ok"
        for tenant in (a, b):  # each finds its own note, not the other's (same words)
            found = ok(client.post("/v1/find_exact", json={"query": word},
                                   headers=tenant.headers))["objects"]
            assert [o["id"] for o in found] == [note_of[tenant.key]]
        assert collect(on_sql).sql_postings["problem"] is None
