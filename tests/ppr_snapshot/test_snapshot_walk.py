"""The PPR walk on an in-memory snapshot against the SQL walk, on the real stack: the same hops
(every entity and row of a graph with parts and titles, RELATES, held / verified / refused
POSSIBLY_SAME, a merged entity, a soft-deleted document, a hub, the per-entity cap and the
edge limit), the same explain and the same ranking; a snapshot never answers for another
tenant, and a change to one tenant reaches its snapshot and leaves the other's alone.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import psycopg
import pytest

from pipeline.domain.read_model import Filters
from pipeline.retrieval.ppr.multihop import ppr_explain
from pipeline.retrieval.ppr.stage import PprConfig, PprResult, PprStage, RowRef
from pipeline.retrieval.store.ppr_graph import PgEntityGraph
from pipeline.settings import Settings
from tests.entities.holdutil import extract_now
from tests.pipelineutil import ingest, put
from tests.ppr_snapshot.snaputil import fresh_view, snapshots_on
from tests.ppr_walk.test_ppr_hop_sql import (
    DOCS,
    QUERY,
    _content,
    _entity,
    tenant as tenant,  # the fixture, shared
)

CONFIGS = [PprConfig(hub_min_rows=100),
           PprConfig(hub_min_rows=3, hub_fraction=0.2),  # Harbor Guild is a hub
           PprConfig(hub_min_rows=100, rows_per_entity=1),  # the per-entity cap cuts
           PprConfig(hub_min_rows=100, max_hops=1),
           PprConfig(hub_min_rows=100, max_edges=12)]  # the edge bound cuts


def _explain(result: PprResult) -> dict[str, object]:
    block = ppr_explain(result, max_hubs=20)
    return {k: v for k, v in block.items() if k not in ("walk_source", "snapshot_age")}


def _ranking(result: PprResult) -> list[tuple[uuid.UUID, float]]:
    return [(h.id, h.score) for h in [*result.objects, *result.parts]]


def _weak_seed(settings: Settings, film: str) -> list[RowRef]:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        part = conn.execute("SELECT id FROM objects WHERE parent_id = %s ORDER BY position"
                            " LIMIT 1", (film,)).fetchone()
    assert part is not None
    return [RowRef(part[0], uuid.UUID(film), True)]


def test_every_hop_answers_as_the_sql_hop(
        catalog: Settings, tenant: tuple[uuid.UUID, dict[str, str]]) -> None:
    ns, _ = tenant
    with psycopg.connect(catalog.effective_postgres_dsn) as conn:
        entities = [r[0] for r in conn.execute(
            "SELECT id FROM entities WHERE namespace_id = %s ORDER BY id", (ns,))]
        rows = [r[0] for r in conn.execute(
            "SELECT id FROM objects WHERE namespace_id = %s ORDER BY id", (ns,))]
    assert len(entities) > 8 and len(rows) > 6

    async def compare() -> int:
        async with snapshots_on(catalog) as (pool, snaps):
            view = await fresh_view(snaps, ns)
            graph = PgEntityGraph(pool)
            compared = 0
            for cap in (1, 2, 100):
                for limit in (0, 1, 100):
                    for picked in (entities, entities[::3], entities[1::2]):
                        for asked_rows in (rows, rows[::2], []):
                            sql = await graph.hop(ns, picked, asked_rows, cap, limit)
                            mine = await view.hop(ns, picked, asked_rows, cap, limit)
                            assert mine == sql, (cap, limit)
                            compared += 1
            return compared

    assert asyncio.run(compare()) == 81


@pytest.mark.parametrize("config", CONFIGS, ids=["plain", "hub", "row-cap", "one-hop",
                                                 "edge-cap"])
def test_the_snapshot_walk_explains_and_ranks_as_the_sql_walk(
        catalog: Settings, tenant: tuple[uuid.UUID, dict[str, str]], config: PprConfig
        ) -> None:
    ns, ids = tenant
    cfg = PprConfig(**{**config.__dict__, "passage_seed_weight": 0.05})
    weak = _weak_seed(catalog, ids["film"])

    async def both() -> tuple[PprResult, PprResult]:
        async with snapshots_on(catalog) as (pool, snaps):
            await fresh_view(snaps, ns)
            sql_stage = PprStage(PgEntityGraph(pool), cfg)
            snap_stage = PprStage(PgEntityGraph(pool), cfg, snaps)
            plan = await sql_stage.plan(ns, QUERY)
            assert plan.seeds
            return (await sql_stage.rank(ns, plan, Filters(), (), weak),
                    await snap_stage.rank(ns, plan, Filters(), (), weak))

    sql, snap = asyncio.run(both())
    assert (sql.source, snap.source) == ("sql", "snapshot")
    assert sql.snapshot_age is None and snap.snapshot_age is not None
    assert sql.nodes > 3
    assert _explain(snap) == _explain(sql)
    assert _ranking(snap) == _ranking(sql)  # same node numbers: the very same floats
    block = ppr_explain(snap, max_hubs=20)
    assert block["walk_source"] == "snapshot" and isinstance(block["snapshot_age"], float)
    assert uuid.UUID(ids["river"]) not in {h.id for h in snap.objects}  # soft-deleted


def test_tenants_have_their_own_snapshots(
        catalog: Settings, tenant: tuple[uuid.UUID, dict[str, str]]) -> None:
    ns, ids = tenant
    other = uuid.uuid4()  # the same documents: the same names, its own entities and rows
    other_ids = {doc: str(uuid.uuid4()) for doc in DOCS}
    ingest(catalog, [put(other, id=other_ids[doc], kind="note", title=title,
                         content=_content(parts)) for doc, (title, parts) in DOCS.items()])
    extract_now(catalog, other_ids.values())
    cfg = PprConfig(hub_min_rows=100)

    async def run() -> None:
        async with snapshots_on(catalog) as (pool, snaps):
            mine = await fresh_view(snaps, ns)
            theirs = await fresh_view(snaps, other)
            assert not set(mine.r_keys) & set(theirs.r_keys)
            assert not set(mine.e_keys) & set(theirs.e_keys)
            # my entity and row asked in the other tenant's name: nothing
            hop = await mine.hop(other, [_entity(ns, "Elara Vantreck")],
                                 [uuid.UUID(ids["bridge"])], 100, 100)
            assert not (hop.rows_of or hop.entities_of or hop.links)
            hop = await theirs.hop(other, [_entity(ns, "Elara Vantreck")],
                                   [uuid.UUID(ids["bridge"])], 100, 100)
            assert not (hop.rows_of or hop.entities_of or hop.links)
            stage = PprStage(PgEntityGraph(pool), cfg, snaps)
            plan = await stage.plan(ns, QUERY)
            before = await stage.rank(ns, plan, Filters(), ())
            # the other tenant deletes its bridge document
            with psycopg.connect(catalog.effective_postgres_dsn, autocommit=True) as conn:
                conn.execute("UPDATE objects SET deleted_at = now() WHERE id = %s",
                             (other_ids["bridge"],))
            changed = time.monotonic()
            await fresh_view(snaps, ns, after=changed)
            theirs = await fresh_view(snaps, other, after=changed)
            assert not theirs.live_row(uuid.UUID(other_ids["bridge"]))
            after = await stage.rank(ns, plan, Filters(), ())
            assert after.source == before.source == "snapshot"
            assert _explain(after) == _explain(before)
            assert _ranking(after) == _ranking(before)
            their_plan = await stage.plan(other, QUERY)
            their = await stage.rank(other, their_plan, Filters(), ())
            assert their.source == "snapshot"
            assert uuid.UUID(other_ids["bridge"]) not in {h.id for h in their.objects}
            assert not {h.id for h in their.objects} & {uuid.UUID(i) for i in ids.values()}

    asyncio.run(run())
