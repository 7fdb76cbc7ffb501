"""Embeddings in their own narrow table (migration 0033): the embedding worker claims and writes
back without rewriting the wide `objects` row, an unchanged put leaves the narrow row alone, the
claim is a HOT update, and the dense channel reads the vectors per tenant."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from pipeline.domain.read_model import Filters
from pipeline.embedding.embedders import build_embedder
from pipeline.embedding.identity import model_key
from pipeline.embedding.service import EmbeddingService, claim
from pipeline.postgres.pool import make_async_pool, make_pool
from pipeline.retrieval.store.search import PgPartSearcher
from pipeline.settings import Settings
from tests.leanwrites.conftest import apply, many_rows
from tests.pipelineutil import Proc, Publisher, indexed, put, wait_for

pytestmark = pytest.mark.stack

LONG = "\n\n".join(f"Paragraph {i} is about subject {i} and some more words." for i in range(4))


def _versions(conn: psycopg.Connection[Any], table: str, root: str) -> dict[str, str]:
    """id -> (xmin, ctid) of `table`'s rows of one object: a rewrite changes both."""
    root_of = sql.SQL("coalesce(parent_id, id)" if table == "objects" else "root_id")
    return {str(r[0]): r[1] for r in conn.execute(
        sql.SQL("SELECT id, xmin::text || ctid::text FROM {} WHERE {} = %s").format(
            sql.Identifier(table), root_of), (root,)).fetchall()}


def test_embedding_does_not_rewrite_the_wide_row(db: psycopg.Connection[Any],
                                                 embedding: EmbeddingService) -> None:
    ns = uuid.uuid4()
    event = put(ns, kind="doc", title="Lean", content=LONG)
    oid = event["data"]["id"]
    apply(db, event)
    wide = _versions(db, "objects", oid)
    assert len(wide) >= 3  # the object and its parts
    assert db.execute("SELECT count(*) FROM object_embeddings WHERE root_id = %s"
                      " AND embed_status = 'pending'", (oid,)).fetchone() == (len(wide),)

    stats = embedding.run()

    assert stats.embedded == len(wide) and stats.roots_completed == 1
    assert _versions(db, "objects", oid) == wide  # claimed, embedded, written back: untouched
    rows = db.execute("SELECT e.embed_status, e.model, e.embedding IS NOT NULL,"
                      " e.embedded_hash = o.index_text_hash FROM object_embeddings e"
                      " JOIN objects o ON o.id = e.id WHERE e.root_id = %s", (oid,)).fetchall()
    assert set(rows) == {("done", model_key(embedding.embedder), True, True)}
    # the root went to the graph's outbox once complete (the put's own sync before that)
    assert db.execute("SELECT count(*) FROM outbox WHERE aggregate_id = %s AND op = 'node_sync'",
                      (oid,)).fetchone() == (2,)


def test_a_text_indexed_twice_is_embedded_once(lean: Settings,
                                              db: psycopg.Connection[Any]) -> None:
    """A document of one chunk indexes one text as itself and as its part: the embedder gets
    it once, both rows get its vector; in each of two tenants, whose rows stay their own."""
    seen: list[str] = []
    embedder = build_embedder(lean)

    class Counting:
        name, dim = embedder.name, embedder.dim

        def embed(self, texts: Any) -> Any:
            seen.extend(texts)
            return embedder.embed(texts)

    tenants = [uuid.uuid4(), uuid.uuid4()]
    events = [put(ns, kind="doc", title="Short", content="One short paragraph.")
              for ns in tenants]
    apply(db, *events)
    pool = make_pool(lean, max_size=2, name="leanwrites-distinct")
    try:
        stats = EmbeddingService(lean, pool, Counting()).run()
    finally:
        pool.close()

    assert stats.embedded == 4  # per tenant: the document and its one part
    assert len(seen) == 1  # the same text in both tenants, in one claimed batch
    for ns, event in zip(tenants, events, strict=True):
        rows = db.execute("SELECT o.namespace_id, o.parent_id IS NULL, e.embedding"
                          " FROM object_embeddings e JOIN objects o ON o.id = e.id"
                          " WHERE e.root_id = %s", (event["data"]["id"],)).fetchall()
        assert sorted(r[1] for r in rows) == [False, True]
        assert {r[0] for r in rows} == {ns}
        assert np.array_equal(rows[0][2], rows[1][2])
        assert np.allclose(rows[0][2], embedder.embed(seen)[0])


def test_unchanged_put_leaves_the_narrow_row_alone(db: psycopg.Connection[Any],
                                                   embedding: EmbeddingService) -> None:
    ns = uuid.uuid4()
    event = put(ns, kind="doc", title="Lean", content=LONG)
    oid = event["data"]["id"]
    apply(db, event)
    embedding.run()
    narrow = _versions(db, "object_embeddings", oid)

    apply(db, put(ns, id=oid, kind="doc", title="Lean", content=LONG))  # new event id, same text
    assert _versions(db, "object_embeddings", oid) == narrow

    # a new title changes the index text of the object and of every part (their context title)
    apply(db, put(ns, id=oid, kind="doc", title="Leaner", content=LONG))
    statuses = db.execute("SELECT embed_status, count(*) FROM object_embeddings"
                          " WHERE root_id = %s GROUP BY 1", (oid,)).fetchall()
    assert statuses == [("pending", len(narrow))]
    assert embedding.run().embedded == len(narrow)


def test_a_failed_row_is_retried_by_a_put_and_a_hidden_one_never_claimed(
        db: psycopg.Connection[Any], embedding: EmbeddingService) -> None:
    ns = uuid.uuid4()
    failed, hidden = put(ns, kind="doc", title="Failed"), put(ns, kind="doc", title="Hidden")
    apply(db, failed, hidden)
    db.execute("UPDATE object_embeddings SET embed_status = 'failed', embed_attempts = 3,"
               " embed_error = 'refused' WHERE id = %s", (failed["data"]["id"],))
    db.execute("UPDATE objects SET deleted_at = now() WHERE id = %s", (hidden["data"]["id"],))

    apply(db, put(ns, id=failed["data"]["id"], kind="doc", title="Failed"))  # same text
    assert db.execute("SELECT embed_status, embed_attempts, embed_error FROM object_embeddings"
                      " WHERE id = %s", (failed["data"]["id"],)).fetchone() == ("pending", 3,
                                                                               "refused")
    assert embedding.run().embedded == 1  # the failed one; the hidden one stays pending
    assert db.execute("SELECT embed_status FROM object_embeddings WHERE id = %s",
                      (hidden["data"]["id"],)).fetchone() == ("pending",)


def test_the_claim_is_a_hot_update(lean: Settings, db: psycopg.Connection[Any]) -> None:
    """A claim of a full batch on a table of many pending rows: every lease is a HOT update of
    the narrow row, and the wide rows are not written."""
    ns = uuid.uuid4()
    many_rows(db, ns)
    with db.transaction():
        claimed = claim(db, None, lease=60.0, limit=lean.embed_batch_size)
        upd, hot = db.execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables"
                              " WHERE relname = 'object_embeddings'").fetchone() or (0, 0)
        wide = db.execute("SELECT n_tup_upd FROM pg_stat_xact_user_tables"
                          " WHERE relname = 'objects'").fetchone()
    assert len(claimed) == lean.embed_batch_size
    assert upd == hot == len(claimed)
    assert wide == (0,)


def test_dense_search_reads_the_narrow_table_per_tenant(lean: Settings,
                                                        db: psycopg.Connection[Any]) -> None:
    """Two tenants with the same vectors: each finds only its own rows, and a row without a
    vector is not a dense candidate."""
    a, b = uuid.uuid4(), uuid.uuid4()
    puts = {ns: [put(ns, kind="doc", title=f"{ns} {i}") for i in range(3)] for ns in (a, b)}
    apply(db, *puts[a], *puts[b])
    rng = np.random.default_rng(7)
    vectors = rng.random((3, lean.vector_dim)).astype(np.float32)
    for ns in (a, b):
        for event, vector in zip(puts[ns][:2], vectors, strict=False):  # the third: no vector
            db.execute("UPDATE object_embeddings SET embedding = %s, embed_status = 'done'"
                       " WHERE id = %s", (vector, event["data"]["id"]))

    async def search(ns: uuid.UUID) -> list[str]:
        pool = await make_async_pool(lean, max_size=1)
        try:
            hits = await PgPartSearcher(pool, stats_ttl=0).search_dense(
                ns, list(vectors[0]), Filters(), (), 10)
        finally:
            await pool.close()
        return [str(h.id) for h in hits]

    for ns in (a, b):
        found = asyncio.run(search(ns))
        assert found == [puts[ns][0]["data"]["id"], puts[ns][1]["data"]["id"]]


def test_the_live_worker_leaves_the_consumers_row_version(procs: dict[str, Proc],
                                                          catalog: Settings,
                                                          publisher: Publisher) -> None:
    """End to end: once the live pipeline embedded and projected an object, its rows are still
    the versions the consumer wrote (same transaction as the event's ledger row)."""
    event = put(uuid.uuid4(), kind="note", title="Lean end to end", content=LONG)
    oid = event["data"]["id"]
    publisher.send(event, oid)
    wait_for(lambda: indexed(catalog, oid), timeout=60, what="the object embedded and projected")
    with psycopg.connect(catalog.effective_postgres_dsn) as conn:
        ledger = conn.execute("SELECT xmin::text FROM processed_events WHERE event_id = %s",
                              (event["id"],)).fetchone()
        versions = conn.execute("SELECT DISTINCT xmin::text FROM objects"
                                " WHERE coalesce(parent_id, id) = %s", (oid,)).fetchall()
    assert ledger is not None and versions == [ledger]


def _flags_hold(conn: psycopg.Connection[Any]) -> dict[str, bool]:
    """Each narrow row's `has_live_parts` (migration 0057), after checking it against the rows:
    true exactly for an object with a part that is not deleted."""
    rows = conn.execute(
        "SELECT e.id::text, e.has_live_parts, EXISTS (SELECT 1 FROM objects c"
        " WHERE c.parent_id = e.id AND c.deleted_at IS NULL) FROM object_embeddings e"
    ).fetchall()
    assert [r[0] for r in rows if r[1] != r[2]] == []
    return {r[0]: r[1] for r in rows}


def test_the_dense_graph_holds_the_rows_without_live_parts(
        lean: Settings, db: psycopg.Connection[Any]) -> None:
    """An object with live parts is not searchable and is not in the HNSW graph; the flag that
    says so follows puts, a part's deletion and revival, and a put that drops the parts, and a
    searchable object is found by the dense channel again."""
    ns = uuid.uuid4()
    doc = put(ns, kind="doc", title="Long", content=LONG)
    memo = put(ns, kind="doc", title="Memo")
    oid, memo_id = doc["data"]["id"], memo["data"]["id"]
    apply(db, doc, memo)
    flags = _flags_hold(db)
    parts = [r[0] for r in db.execute("SELECT id::text FROM objects WHERE parent_id = %s",
                                      (oid,)).fetchall()]
    assert len(parts) > 1 and flags[oid] and not flags[memo_id]
    assert not any(flags[p] for p in parts)
    vector = np.ones(lean.vector_dim, dtype=np.float32)
    db.execute("UPDATE object_embeddings SET embedding = %s, embed_status = 'done'"
               " WHERE id = ANY(%s::uuid[])", (vector, [oid, memo_id]))

    async def dense() -> set[str]:
        pool = await make_async_pool(lean, max_size=1)
        try:
            searcher = PgPartSearcher(pool, stats_ttl=0, exact_dense_threshold=0)  # HNSW
            return {str(h.id) for h in await searcher.search_dense(
                ns, list(vector), Filters(), (), 10)}
        finally:
            await pool.close()

    assert asyncio.run(dense()) == {memo_id}  # the parts have no vector yet
    db.execute("UPDATE objects SET deleted_at = now() WHERE parent_id = %s", (oid,))
    assert not _flags_hold(db)[oid]
    assert asyncio.run(dense()) == {memo_id, oid}  # no live parts: the object is searchable
    db.execute("UPDATE objects SET deleted_at = NULL WHERE id = %s", (parts[0],))
    assert _flags_hold(db)[oid]
    assert asyncio.run(dense()) == {memo_id}
    apply(db, put(ns, id=oid, kind="doc", title="Long"))  # no content: its parts go
    assert not _flags_hold(db)[oid]
