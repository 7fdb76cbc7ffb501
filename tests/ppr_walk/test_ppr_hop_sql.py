"""The PPR walk's one-statement hop (`PgEntityGraph.hop`) on the real stack: the same walk and
the same ranking as the three statements per hop it replaced (kept here as the reference), on
a small graph with every case the walk reads (parts and titles, RELATES, held / verified /
refused POSSIBLY_SAME, a merged entity, a soft-deleted part, a hub, the per-entity cap); and a
hop never leaves its namespace.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pipeline.domain.entity_reads import EntityLink, Hop, RowMention
from pipeline.domain.read_model import Filters
from pipeline.entities.ids import entity_id
from pipeline.entities.names import normalise
from pipeline.postgres.pool import make_async_pool
from pipeline.retrieval.ppr.stage import PprConfig, PprResult, PprStage, RowRef
from pipeline.retrieval.store.filters import SEARCHABLE_FROM, searchable
from pipeline.retrieval.store.ppr_graph import PgEntityGraph
from pipeline.settings import Settings
from tests.entities.holdutil import extract_now
from tests.pipelineutil import ingest, put

# The statements of the walk before the one-statement hop, verbatim: the reference.
_LIVE_ROW = ("JOIN objects o ON o.id = m.row_id AND o.namespace_id = %(ns)s"
             " AND o.deleted_at IS NULL"
             " JOIN objects p ON p.id = coalesce(o.parent_id, o.id) AND p.deleted_at IS NULL")
OLD_ROWS_OF = sql.SQL(
    "SELECT r.row_id, r.object_id, r.is_part, e.id, e.part_count"
    " FROM unnest(%(ids)s::uuid[]) AS q(id)"
    " JOIN entities e ON e.id = q.id AND e.namespace_id = %(ns)s AND e.merged_into IS NULL"
    " CROSS JOIN LATERAL (SELECT DISTINCT m.row_id, p.id AS object_id,"
    " o.parent_id IS NOT NULL AS is_part FROM mentions m " + _LIVE_ROW +
    " WHERE m.entity_id = e.id AND m.namespace_id = %(ns)s"
    " ORDER BY m.row_id LIMIT %(cap)s) AS r")
OLD_ENTITIES_OF = sql.SQL(
    "SELECT DISTINCT m.row_id, p.id, o.parent_id IS NOT NULL, e.id, e.part_count"
    " FROM mentions m " + _LIVE_ROW +
    " JOIN entities e ON e.id = m.entity_id AND e.merged_into IS NULL"
    " WHERE m.row_id = ANY(%(ids)s::uuid[]) AND m.namespace_id = %(ns)s")
OLD_LINKS_OF = sql.SQL(
    "SELECT x.from_id, x.to_id, x.edge_type, x.status, f.part_count, t.part_count"
    " FROM entity_edges x"
    " JOIN entities f ON f.id = x.from_id AND f.merged_into IS NULL"
    " JOIN entities t ON t.id = x.to_id AND t.merged_into IS NULL"
    " WHERE x.namespace_id = %(ns)s AND (x.from_id = ANY(%(ids)s::uuid[])"
    " OR x.to_id = ANY(%(ids)s::uuid[]))"
    " AND x.edge_type IN ('RELATES', 'POSSIBLY_SAME') AND x.status IS DISTINCT FROM 'refused'"
    " ORDER BY x.from_id, x.to_id LIMIT %(limit)s")


OLD_VISIBLE_OBJECTS = sql.SQL(
    "SELECT DISTINCT p.id FROM {from_} WHERE {where} AND p.id = ANY(%(objs)s::uuid[])")


class ThreeStatementGraph(PgEntityGraph):
    """The walk's store as it was: rows, entities and links of a hop by three statements, and
    the visible objects without the implied index condition."""

    async def visible_objects(self, namespace: uuid.UUID, object_ids: Sequence[uuid.UUID],
                              filters: Filters, scope_ids: Sequence[uuid.UUID]
                              ) -> set[uuid.UUID]:
        frag = searchable(namespace, filters, scope_ids)
        query = OLD_VISIBLE_OBJECTS.format(from_=SEARCHABLE_FROM, where=frag.where)
        return {r[0] for r in await self._fetch(query, {**frag.params,
                                                        "objs": list(object_ids)})}

    async def hop(self, namespace: uuid.UUID, entity_ids: Sequence[uuid.UUID],
                  row_ids: Sequence[uuid.UUID], per_entity: int, link_limit: int) -> Hop:
        def mention(r: tuple[Any, ...]) -> RowMention:
            return RowMention(r[0], r[1], bool(r[2]), r[3], int(r[4]))

        rows, entities, links = await asyncio.gather(
            self._fetch(OLD_ROWS_OF, {"ns": namespace, "ids": list(entity_ids),
                                      "cap": per_entity}),
            self._fetch(OLD_ENTITIES_OF, {"ns": namespace, "ids": list(row_ids)}),
            self._fetch(OLD_LINKS_OF, {"ns": namespace, "ids": list(entity_ids),
                                       "limit": link_limit}))
        return Hop([mention(r) for r in rows], [mention(r) for r in entities],
                   [EntityLink(r[0], r[1], r[2], r[3], int(r[4]), int(r[5])) for r in links])


# Names recur across documents so the walk has somewhere to go; "Harbor Guild" is in most
# rows (a hub once the hub floor is low).
DOCS = {
    "film": ("Moonfall Harbor", ["Moonfall Harbor is a drama by Elara Vantreck for Harbor Guild.",
                                 "Corvid Studio released Moonfall Harbor in Quillon."]),
    "bridge": ("Elara Vantreck", ["Elara Vantreck grew up in Quillon, a town of Ostravia.",
                                  "Elara Vantreck joined Corvid Studio and Harbor Guild."]),
    "town": ("Quillon", ["Quillon lies on the Ostra River in Ostravia, says Harbor Guild."]),
    "studio": ("Corvid Studio", ["Corvid Studio employs Marek Dunmore of Harbor Guild.",
                                 "Marek Dunmore filmed Moonfall Harbor at Quillon."]),
    "river": ("Ostra River", ["The Ostra River floods Quillon; Harbor Guild keeps records."]),
    "gone": ("Lost Reel", ["Lost Reel was shot by Elara Vantreck near the Ostra River."]),
}
QUERY = "Where was the director of Moonfall Harbor born?"


def _content(sentences: list[str]) -> str:
    return " ".join(sentences)  # one part: the document's title and its part name entities


async def _walk(settings: Settings, graph_type: type[PgEntityGraph], ns: uuid.UUID,
                config: PprConfig, first: Sequence[RowRef], filters: Filters | None = None
                ) -> PprResult:
    pool = await make_async_pool(settings)
    try:
        stage = PprStage(graph_type(pool), config)
        plan = await stage.plan(ns, QUERY)
        assert plan.seeds, "the query names Moonfall Harbor"
        return await stage.rank(ns, plan, filters or Filters(), (), first)
    finally:
        await pool.close()


def _entity(ns: uuid.UUID, name: str) -> uuid.UUID:
    return entity_id(ns, normalise(name))


@pytest.fixture(scope="module")
def tenant(catalog: Settings) -> tuple[uuid.UUID, dict[str, str]]:
    """A namespace with the documents above, extracted by the real stage, then edges of every
    walkable and unwalkable kind, a merge and a soft-deleted document written as the resolver
    and the write path would leave them."""
    ns = uuid.uuid4()
    ids = {doc: str(uuid.uuid4()) for doc in DOCS}
    ingest(catalog, [put(ns, id=ids[doc], kind="note", title=title, content=_content(parts))
                     for doc, (title, parts) in DOCS.items()])
    extract_now(catalog, ids.values())
    e = {name: _entity(ns, name) for name in ("Moonfall Harbor", "Elara Vantreck", "Quillon",
                                              "Ostravia", "Corvid Studio", "Marek Dunmore",
                                              "Ostra River", "Lost Reel")}
    with psycopg.connect(catalog.effective_postgres_dsn, autocommit=True) as conn:
        known = {r[0] for r in conn.execute("SELECT id FROM entities WHERE namespace_id = %s",
                                            (ns,))}
        assert set(e.values()) <= known, "the heuristic extractor found every name"

        def edge(a: str, b: str, kind: str, status: str | None, predicate: str = "") -> None:
            low, high = sorted((e[a], e[b]))
            conn.execute("INSERT INTO entity_edges (namespace_id, from_id, to_id, edge_type,"
                         " predicate, weight, status) VALUES (%s, %s, %s, %s, %s, 1, %s)",
                         (ns, low, high, kind, predicate, status))

        edge("Elara Vantreck", "Marek Dunmore", "RELATES", None, "works with")
        edge("Quillon", "Ostra River", "POSSIBLY_SAME", "held")
        edge("Ostravia", "Ostra River", "POSSIBLY_SAME", "verified")
        edge("Corvid Studio", "Lost Reel", "POSSIBLY_SAME", "refused")
        # (the stage wrote CO_OCCURS edges: there, and never walked)
        # "Lost Reel" merged into "Moonfall Harbor" (its mentions stay, pointing at the loser,
        # as a test of the merged_into filter), and one document soft-deleted
        conn.execute("UPDATE entities SET merged_into = %s WHERE id = %s",
                     (e["Moonfall Harbor"], e["Lost Reel"]))
        conn.execute("UPDATE objects SET deleted_at = now() WHERE id = %s", (ids["river"],))
        # The session's live worker must not change this graph between the two walks a test
        # compares (its recount of the deleted document, its proposal pass adding POSSIBLY_SAME
        # edges): mark the rows extracted and the entities examined. The updates wait for a
        # write-back or a pass in flight (they lock these rows) and make later ones skip them.
        # Under the pass's own lock, taken first: a pass deletes queue rows in another order
        # (the merged ones of every namespace, then those it examined), and taking them
        # beside it could deadlock; a pass that starts meanwhile finds the lock taken and skips.
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('brainstream.entity_proposals'))")
            conn.execute("DELETE FROM entity_proposal_queue WHERE namespace_id = %s", (ns,))
            conn.execute("UPDATE entity_extraction SET status = 'done',"
                         " extracted_hash = text_hash, recount = false"
                         " WHERE namespace_id = %s", (ns,))
    return ns, ids


@pytest.mark.parametrize("config", [
    PprConfig(hub_min_rows=100),
    PprConfig(hub_min_rows=3, hub_fraction=0.2),  # Harbor Guild is a hub
    PprConfig(hub_min_rows=100, rows_per_entity=1),  # the per-entity cap cuts (truncated)
    PprConfig(hub_min_rows=100, max_hops=1),
], ids=["plain", "hub", "row-cap", "one-hop"])
def test_one_statement_hop_walks_and_ranks_as_the_three_statements(
        catalog: Settings, tenant: tuple[uuid.UUID, dict[str, str]], config: PprConfig
        ) -> None:
    ns, ids = tenant
    with psycopg.connect(catalog.effective_postgres_dsn) as conn:
        film_part = conn.execute("SELECT id FROM objects WHERE parent_id = %s ORDER BY position"
                                 " LIMIT 1", (ids["film"],)).fetchone()
    assert film_part is not None
    weak = [RowRef(film_part[0], uuid.UUID(ids["film"]), True)]
    # iterated to convergence: the early stop compares top-k lists whose ties are broken by
    # node number, and the old statements numbered nodes in no fixed order
    cfg = PprConfig(**{**config.__dict__, "passage_seed_weight": 0.05, "stable_rounds": 0,
                       "tolerance": 1e-12, "max_iterations": 500})
    old = asyncio.run(_walk(catalog, ThreeStatementGraph, ns, cfg, weak))
    new = asyncio.run(_walk(catalog, PgEntityGraph, ns, cfg, weak))
    assert old.nodes > 3 and old.hops >= 1
    for name in ("nodes", "edges", "entities", "rows", "hops", "truncated"):
        assert getattr(new, name) == getattr(old, name), name
    assert {h.id for h in new.hubs} == {h.id for h in old.hubs}
    for got, want in ((new.objects, old.objects), (new.parts, old.parts)):
        assert {h.id: h.score for h in got} == pytest.approx({h.id: h.score for h in want},
                                                             abs=1e-9)
    if config.rows_per_entity == 1:
        assert new.truncated
    if config.hub_min_rows == 3:
        assert new.hubs, "Harbor Guild was met and left out"
    # the soft-deleted document and the merged entity's mentions never enter the walk
    assert uuid.UUID(ids["river"]) not in {h.id for h in new.objects}


def test_a_hop_never_leaves_its_namespace(
        catalog: Settings, tenant: tuple[uuid.UUID, dict[str, str]]) -> None:
    ns, ids = tenant
    other = uuid.uuid4()  # a second tenant with the same documents: its own entities
    other_ids = {doc: str(uuid.uuid4()) for doc in DOCS}
    ingest(catalog, [put(other, id=other_ids[doc], kind="note", title=title,
                         content=_content(parts)) for doc, (title, parts) in DOCS.items()])

    async def hops() -> tuple[Hop, Hop, Hop]:
        pool = await make_async_pool(catalog)
        try:
            graph = PgEntityGraph(pool)
            entity = [_entity(ns, "Elara Vantreck")]
            rows = [uuid.UUID(ids["bridge"])]
            mine = await graph.hop(ns, entity, rows, 100, 100)
            # the first tenant's entity and row ids asked in the second tenant's name
            theirs = await graph.hop(other, entity, rows, 100, 100)
            empty = await graph.hop(ns, [], [], 100, 100)
            return mine, theirs, empty
        finally:
            await pool.close()

    mine, theirs, empty = asyncio.run(hops())
    assert mine.rows_of and mine.entities_of and mine.links
    assert {m.object_id for m in mine.rows_of} <= {uuid.UUID(i) for i in ids.values()}
    assert theirs == Hop([], [], []) and empty == Hop([], [], [])


def test_visible_objects_as_before_under_filters_and_scope(
        catalog: Settings, tenant: tuple[uuid.UUID, dict[str, str]]) -> None:
    ns, ids = tenant
    asked = [uuid.UUID(i) for i in ids.values()] + [uuid.uuid4()]

    async def both(filters: Filters, scope: Sequence[uuid.UUID]
                   ) -> tuple[set[uuid.UUID], set[uuid.UUID]]:
        pool = await make_async_pool(catalog)
        try:
            return (await PgEntityGraph(pool).visible_objects(ns, asked, filters, scope),
                    await ThreeStatementGraph(pool).visible_objects(ns, asked, filters, scope))
        finally:
            await pool.close()

    everything = {uuid.UUID(i) for d, i in ids.items() if d != "river"}  # river: deleted
    cases = [(Filters(), (), everything),
             (Filters(title="Quillon"), (), {uuid.UUID(ids["town"])}),
             (Filters(kinds=("no-such-kind",)), (), set()),
             (Filters(), (uuid.UUID(ids["film"]),), {uuid.UUID(ids["film"])})]
    for filters, scope, expected in cases:
        new, old = asyncio.run(both(filters, scope))
        assert new == old == expected, (filters, scope)


def test_a_filter_keeps_only_the_objects_it_allows(
        catalog: Settings, tenant: tuple[uuid.UUID, dict[str, str]]) -> None:
    ns, ids = tenant
    config = PprConfig(hub_min_rows=100, passage_seed_weight=0.0)
    everything = asyncio.run(_walk(catalog, PgEntityGraph, ns, config, []))
    town = uuid.UUID(ids["town"])
    assert town in {h.id for h in everything.objects} and len(everything.objects) > 1
    only = asyncio.run(_walk(catalog, PgEntityGraph, ns, config, [], Filters(title="Quillon")))
    assert [h.id for h in only.objects] == [town]
