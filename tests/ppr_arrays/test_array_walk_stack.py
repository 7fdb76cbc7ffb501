"""The PPR stage on a fresh in-memory snapshot, on the real stack: seeds matched on the
snapshot's names and the subgraph grown on its arrays, with no SQL for either (the store's
`match_names` and `hop` are never called), answering what the SQL path answers (same seeds,
same explain, same ranking, ties aside) on a bushy graph whose bounds cut (node bound,
frontier, per-entity rows); two tenants keep their own names, and a merge, a new document
and an alias reach the snapshot's seed lookup.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from itertools import groupby

import psycopg
import pytest

from pipeline.domain.entity_reads import Hop, NameMatch
from pipeline.domain.read_model import Filters, Hit
from pipeline.entities.ids import entity_id
from pipeline.entities.merging import merge
from pipeline.entities.names import normalise
from pipeline.retrieval.ppr.multihop import plan_explain, ppr_explain
from pipeline.retrieval.ppr.stage import PprConfig, PprResult, PprStage, RowRef, SeedPlan
from pipeline.retrieval.store.ppr_graph import PgEntityGraph
from pipeline.settings import Settings
from tests.entities.holdutil import extract_now
from tests.pipelineutil import ingest, put
from tests.ppr_snapshot.snaputil import fresh_view, snapshots_on

PEOPLE = ["Elara Vantreck", "Marek Dunmore", "Zélie Marchand", "Orrin Castellane",
          "Tamsin Greaves", "Yusuf Okonedo", "Brielle Atwater", "Casimir Holt"]
PLACES = ["Quillon", "Ostravia", "Corvid Studio", "Harbor Guild", "Moonfall Harbor",
          "Lantern Archive"]
QUERIES = ["Where did Elara Vantreck meet Marek Dunmore?",
           "Which studio hired Zelie Marchand?",  # by fold
           "Who wrote about the Lantern Archive and Casimir Holt?",
           "What did the EVX team publish?",  # by alias
           "Tamsin Greaves in Quillon"]
CONFIGS = [PprConfig(hub_min_rows=100),
           PprConfig(hub_min_rows=100, max_nodes=25, frontier=3, rows_per_entity=4),
           PprConfig(hub_min_rows=10, hub_fraction=0.05, max_edges=30, passage_seed_weight=0.05)]


def _docs() -> list[tuple[str, str]]:
    """Titles and contents: each document names two people and a place, so names recur and
    the graph is bushy."""
    docs = []
    for i in range(24):
        a, b = PEOPLE[i % len(PEOPLE)], PEOPLE[(3 * i + 1) % len(PEOPLE)]
        place = PLACES[(i * 5) % len(PLACES)]
        docs.append((f"Chronicle {i}", f"{a} met {b} at {place} in spring. "
                                       f"Later {b} wrote to {a} about {place}, "
                                       "says Harbor Guild."))  # in every row: a hub at 10
    return docs


class NoSqlGraph(PgEntityGraph):
    """The store, counting the walk's SQL reads (name lookups and hops)."""

    calls = 0

    async def match_names(self, namespace: uuid.UUID, keys: Sequence[str],
                          folds: Sequence[str]) -> list[NameMatch]:
        NoSqlGraph.calls += 1
        return await super().match_names(namespace, keys, folds)

    async def hop(self, namespace: uuid.UUID, entity_ids: Sequence[uuid.UUID],
                  row_ids: Sequence[uuid.UUID], per_entity: int, link_limit: int) -> Hop:
        NoSqlGraph.calls += 1
        return await super().hop(namespace, entity_ids, row_ids, per_entity, link_limit)


def _tenant(settings: Settings) -> tuple[uuid.UUID, list[str]]:
    ns = uuid.uuid4()
    ids = [str(uuid.uuid4()) for _ in _docs()]
    ingest(settings, [put(ns, id=oid, kind="note", title=title, content=content)
                      for oid, (title, content) in zip(ids, _docs(), strict=True)])
    extract_now(settings, ids)
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        # an alias only the alias table knows (written as the write-back writes one)
        conn.execute("INSERT INTO entity_aliases (namespace_id, norm, alias, entity_id, source)"
                     " VALUES (%s, 'evx team', 'EVX team', %s, 'manual')",
                     (ns, entity_id(ns, normalise("Elara Vantreck"))))
        # the session's live worker must not change the graph between two compared walks
        conn.execute("UPDATE entity_extraction SET status = 'done',"
                     " extracted_hash = text_hash, recount = false WHERE namespace_id = %s",
                     (ns,))
        conn.execute("DELETE FROM entity_proposal_queue WHERE namespace_id = %s", (ns,))
    return ns, ids


@pytest.fixture(scope="module")
def tenants(catalog: Settings) -> list[tuple[uuid.UUID, list[str]]]:
    """Two namespaces with the same documents: the same names, their own entities."""
    return [_tenant(catalog), _tenant(catalog)]


def _seeds(plan: SeedPlan) -> object:
    return plan_explain(plan)


def _explain(result: PprResult) -> dict[str, object]:
    return {k: v for k, v in ppr_explain(result, max_hubs=20).items()
            if k not in ("walk_source", "snapshot_age")}


def _ranked(hits: list[Hit]) -> list[tuple[float, frozenset[uuid.UUID]]]:
    """The ranking with ties as sets: equal scores (to 1e-12) may come in either order."""
    return [(score, frozenset(h.id for h in group)) for score, group in
            groupby(hits, key=lambda h: round(h.score, 12))]


def _first_rows(settings: Settings, ns: uuid.UUID) -> list[RowRef]:
    """Five parts of the namespace, as the first stage would hand them over (weak seeds)."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        return [RowRef(r[0], r[1], True) for r in conn.execute(
            "SELECT id, parent_id FROM objects WHERE namespace_id = %s"
            " AND parent_id IS NOT NULL ORDER BY id LIMIT 5", (ns,))]


async def _both(settings: Settings, ns: uuid.UUID, config: PprConfig, query: str,
                first_rows: Sequence[RowRef]) -> tuple[
                    tuple[SeedPlan, PprResult], tuple[SeedPlan, PprResult], int]:
    async with snapshots_on(settings) as (pool, snaps):
        await fresh_view(snaps, ns)
        sql_stage = PprStage(PgEntityGraph(pool), config)
        snap_stage = PprStage(NoSqlGraph(pool), config, snaps)
        await snap_stage.graph.live_rows(ns)  # cached by the store: not the walk's SQL
        sql_plan = await sql_stage.plan(ns, query)
        sql = await sql_stage.rank(ns, sql_plan, Filters(), (), first_rows)
        NoSqlGraph.calls = 0
        snap_plan = await snap_stage.plan(ns, query)
        snap = await snap_stage.rank(ns, snap_plan, Filters(), (), first_rows)
        return (sql_plan, sql), (snap_plan, snap), NoSqlGraph.calls


@pytest.mark.parametrize("config", CONFIGS, ids=["plain", "bounded", "hubs-edges"])
def test_the_snapshot_path_reads_no_sql_and_answers_as_the_sql_path(
        catalog: Settings, tenants: list[tuple[uuid.UUID, list[str]]], config: PprConfig
        ) -> None:
    ns, _ = tenants[0]
    first = _first_rows(catalog, ns)
    walked = 0
    for query in QUERIES:
        (sql_plan, sql), (snap_plan, snap), calls = asyncio.run(
            _both(catalog, ns, config, query, first))
        assert calls == 0, "seeds and hops came from the snapshot"
        assert snap.source == "snapshot" and sql.source == "sql"
        assert _seeds(snap_plan) == _seeds(sql_plan), query
        assert _explain(snap) == _explain(sql), query
        assert _ranked(snap.objects) == _ranked(sql.objects), query
        assert _ranked(snap.parts) == _ranked(sql.parts), query
        assert snap.mass == pytest.approx(sql.mass, abs=1e-12)
        walked += bool(sql_plan.seeds)
        methods = {s["method"] for s in _seeds(snap_plan)["seeds"]}  # type: ignore[index]
        if "Zelie" in query:
            assert methods == {"fold"}
        if "EVX" in query:
            assert methods == {"alias"}
        if config.max_nodes < 100:
            assert snap.truncated
        if config.hub_min_rows == 10:
            assert entity_id(ns, normalise("Harbor Guild")) in {h.id for h in snap.hubs}
    assert walked == len(QUERIES)


def test_tenants_names_stay_apart_and_changes_reach_the_seed_lookup(
        catalog: Settings, tenants: list[tuple[uuid.UUID, list[str]]]) -> None:
    (mine, my_ids), (theirs, _) = tenants
    query = "Who met Casimir Holt?"
    cfg = PprConfig(hub_min_rows=100)

    async def run() -> None:
        async with snapshots_on(catalog) as (pool, snaps):
            stage = PprStage(PgEntityGraph(pool), cfg, snaps)
            sql_stage = PprStage(PgEntityGraph(pool), cfg)
            await fresh_view(snaps, mine)
            await fresh_view(snaps, theirs)
            before = await stage.plan(theirs, query)
            assert [s.entity.id for s in before.seeds] == [
                entity_id(theirs, normalise("Casimir Holt"))]
            # my Casimir Holt merged into my Orrin Castellane: his name becomes Orrin's alias
            casimir = entity_id(mine, normalise("Casimir Holt"))
            orrin = entity_id(mine, normalise("Orrin Castellane"))
            # a new document names a new person, and an alias of Tamsin arrives with it
            late = str(uuid.uuid4())
            ingest(catalog, [put(mine, id=late, kind="note", title="Postscript",
                                 content="Ysolde Farrow met Tamsin Greaves in Quillon.")])
            extract_now(catalog, [late])
            with psycopg.connect(catalog.effective_postgres_dsn) as conn, conn.transaction():
                merge(conn, mine, casimir, orrin, dry_run=False, decided_by="test")
            changed = time.monotonic()
            await fresh_view(snaps, mine, after=changed)
            await fresh_view(snaps, theirs, after=changed)
            for ns, q in ((mine, query), (mine, "Ysolde Farrow"), (theirs, query)):
                got, want = await stage.plan(ns, q), await sql_stage.plan(ns, q)
                assert _seeds(got) == _seeds(want), (ns, q)
            merged = await stage.plan(mine, query)
            assert [(s.entity.id, s.method) for s in merged.seeds] == [(orrin, "alias")]
            late_plan = await stage.plan(mine, "Ysolde Farrow")
            assert [s.entity.name for s in late_plan.seeds] == ["Ysolde Farrow"]
            assert await stage.plan(theirs, "Ysolde Farrow") == SeedPlan(
                (), (), before.hub_limit)  # the other tenant never sees my names
            after = await stage.plan(theirs, query)
            assert _seeds(after) == _seeds(before)
            result = await stage.rank(mine, merged, Filters(), ())
            assert result.source == "snapshot"
            assert result.objects
            assert {h.id for h in result.objects} <= {uuid.UUID(i) for i in [*my_ids, late]}

    asyncio.run(run())
