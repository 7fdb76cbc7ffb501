"""The live row count behind PPR's hub rule (`PgEntityGraph.live_rows`) on the real stack:
counted on first use, served from the cache within its TTL, and once stale served at once while
a background recount catches up with the writes; one tenant's writes never move another's.
"""

from __future__ import annotations

import asyncio
import uuid

import psycopg

from pipeline.postgres.pool import make_async_pool
from pipeline.retrieval.store.ppr_graph import PgEntityGraph
from pipeline.settings import Settings
from tests.pipelineutil import ingest, put


def _count(settings: Settings, ns: uuid.UUID) -> int:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute("SELECT count(*) FROM objects WHERE namespace_id = %s"
                           " AND deleted_at IS NULL", (ns,)).fetchone()
    return int(row[0]) if row else 0


def test_a_stale_count_answers_at_once_and_is_recounted_behind(catalog: Settings) -> None:
    ns, other = uuid.uuid4(), uuid.uuid4()
    for tenant in (ns, other):
        ingest(catalog, [put(tenant, id=str(uuid.uuid4()), kind="note", title="Ostravia",
                             content="Quillon lies in Ostravia.")])

    async def go() -> tuple[int, int, int, int, int, int]:
        pool = await make_async_pool(catalog)
        try:
            graph = PgEntityGraph(pool, rows_ttl=3600.0)
            first = await graph.live_rows(ns)
            theirs = await graph.live_rows(other)
            await asyncio.to_thread(ingest, catalog, [
                put(ns, id=str(uuid.uuid4()), kind="note", title=f"Note {i}",
                    content=f"Marek Dunmore wrote note {i}.") for i in range(3)])
            cached = await graph.live_rows(ns)  # within the TTL
            graph.rows_ttl = 0.0
            stale = await graph.live_rows(ns)  # stale: answered from the cache, recount behind
            fresh = stale
            for _ in range(200):
                if fresh != stale:
                    break
                await asyncio.sleep(0.05)
                fresh = await graph.live_rows(ns)
            return first, theirs, cached, stale, fresh, await graph.live_rows(other)
        finally:
            await pool.close()

    first, theirs, cached, stale, fresh, theirs_after = asyncio.run(go())
    assert first == theirs == 2  # a note and its part
    assert cached == stale == first
    assert fresh == _count(catalog, ns) == first + 6
    assert theirs_after == theirs == _count(catalog, other)
