"""A snapshot follows the live pipeline (consumer, extraction worker) through the change log:
a published document's entities are walked by the first snapshot read after its extraction
committed (so within `PPR_SNAPSHOT_MAX_AGE`); a merge moves the loser's rows to the survivor;
a soft delete takes the document out of the walk; re-extraction replaces the mentions. Each
time the snapshot's hops equal the SQL hops on the same data.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import psycopg

from pipeline.domain.read_model import Filters
from pipeline.entities.merging import merge
from pipeline.retrieval.ppr.snapshot import EntitySnapshot
from pipeline.retrieval.ppr.stage import PprConfig, PprStage
from pipeline.retrieval.store.ppr_graph import PgEntityGraph
from pipeline.settings import Settings
from tests.entities.stageutil import delete, put, q
from tests.pipelineutil import Proc, Publisher, wait_for
from tests.ppr_snapshot.snaputil import fresh_view, snapshots_on


def _extracted(settings: Settings, oid: uuid.UUID, norm: str) -> bool:
    """The document's rows are extracted and one of them names `norm`."""
    return bool(q(settings, "SELECT 1 FROM mentions m JOIN entities e ON e.id = m.entity_id"
                  " JOIN objects o ON o.id = m.row_id WHERE coalesce(o.parent_id, o.id) = %s"
                  " AND e.norm = %s AND e.merged_into IS NULL", oid, norm))


def _entity(settings: Settings, ns: uuid.UUID, norm: str) -> uuid.UUID:
    return uuid.UUID(str(q(settings, "SELECT id FROM entities WHERE namespace_id = %s"
                           " AND norm = %s", ns, norm)[0][0]))


async def _same_as_sql(graph: PgEntityGraph, view: EntitySnapshot, ns: uuid.UUID,
                       entity: uuid.UUID) -> list[uuid.UUID]:
    """The objects whose rows name `entity`, by the snapshot, checked against SQL."""
    mine = await view.hop(ns, [entity], [], 100, 100)
    assert mine == await graph.hop(ns, [entity], [], 100, 100)
    return [m.object_id for m in mine.rows_of]


def test_published_merged_deleted_and_rewritten_documents_reach_the_snapshot(
        procs: dict[str, Proc], publisher: Publisher, catalog: Settings) -> None:
    ns = uuid.uuid4()
    film, bridge, late = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    publisher.send(put(ns, film, title="Moonfall Harbor", kind="note",
                       content="Moonfall Harbor is a drama by Elara Vantreck, shot in Quillon."))
    publisher.send(put(ns, bridge, title="Elara Vantreck", kind="note",
                       content="Elara Vantreck grew up in Quillon with Marek Dunmore."))
    wait_for(lambda: _extracted(catalog, bridge, "marek dunmore")
             and _extracted(catalog, film, "moonfall harbor"), what="extraction")

    async def run() -> None:
        async with snapshots_on(catalog, max_age=2.0) as (pool, snaps):
            graph = PgEntityGraph(pool)
            view = await fresh_view(snaps, ns)
            elara = _entity(catalog, ns, "elara vantreck")
            assert set(await _same_as_sql(graph, view, ns, elara)) == {film, bridge}

            # 1. a new document, through the pipeline: walked once the snapshot has read past
            # the moment its extraction was seen committed
            publisher.send(put(ns, late, title="Zorvania Almanac", kind="note",
                               content="Elara Vantreck was born in Zorvania near Quillon."))
            await asyncio.to_thread(wait_for, lambda: _extracted(catalog, late, "zorvania"),
                                    what="extraction of the late document")
            seen = time.monotonic()
            view = await fresh_view(snaps, ns, after=seen)
            assert late in await _same_as_sql(graph, view, ns, elara)
            stage = PprStage(graph, PprConfig(hub_min_rows=100), snaps)
            plan = await stage.plan(ns, "Where was the author of Moonfall Harbor born?")
            result = await stage.rank(ns, plan, Filters(), ())
            assert result.source == "snapshot"
            assert late in {h.id for h in result.objects}, "reached through Elara Vantreck"

            # 2. a merge (a person's): Marek Dunmore's rows move to Elara Vantreck
            marek = _entity(catalog, ns, "marek dunmore")
            with psycopg.connect(catalog.effective_postgres_dsn) as conn, conn.transaction():
                merge(conn, ns, marek, elara, dry_run=False, decided_by="test")
            seen = time.monotonic()
            view = await fresh_view(snaps, ns, after=seen)
            assert await _same_as_sql(graph, view, ns, marek) == []  # merged away
            assert bridge in await _same_as_sql(graph, view, ns, elara)

            # 3. a soft delete, through the pipeline
            publisher.send(delete(ns, late))
            await asyncio.to_thread(wait_for, lambda: q(
                catalog, "SELECT 1 FROM objects WHERE id = %s AND deleted_at IS NOT NULL",
                late), what="the delete")
            seen = time.monotonic()
            view = await fresh_view(snaps, ns, after=seen)
            assert late not in await _same_as_sql(graph, view, ns, elara)
            result = await stage.rank(ns, plan, Filters(), ())
            assert late not in {h.id for h in result.objects}

            # 4. re-extraction: the film no longer names Elara Vantreck
            publisher.send(put(ns, film, title="Moonfall Harbor", kind="note",
                               content="Moonfall Harbor is a drama shot in Quillon."))
            await asyncio.to_thread(wait_for, lambda: not _extracted(
                catalog, film, "elara vantreck") and _extracted(catalog, film, "quillon"),
                what="re-extraction")
            seen = time.monotonic()
            view = await fresh_view(snaps, ns, after=seen)
            assert film not in await _same_as_sql(graph, view, ns, elara)
            assert view.counts()["overrides"] > 0  # refreshed by key, not rebuilt
            assert snaps.builds == 1

    asyncio.run(run())
