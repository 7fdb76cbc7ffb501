"""The graph projection of the entity layer, on the real stack: the relay turns entity, mention and
entity-edge rows (filled here by hand, as the extraction stage would) into NamedEntity nodes,
MENTIONS and entity edges; re-applying changes nothing; merges, deletes and revives follow
Postgres; verify finds drift and repair fixes it; a rebuild brings it all back. Two tenants
throughout, and the object readers never see any of it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from pipeline.graph.falkordb.reader import FalkorGraphReader
from pipeline.graph.falkordb.schema import connect
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.ops.rebuild import rebuild_graph
from pipeline.ops.verify import repair, verify
from pipeline.outbox import store as outbox
from pipeline.outbox.ops import ENTITY_SYNC, MENTIONS_SYNC, NODE_SYNC, entity_sync_payload
from pipeline.outbox.relay import ENTITIES, LANE_LOCKS, OBJECTS
from pipeline.settings import Settings
from tests.entities.projutil import edge, enqueue, entity, mention, relay, snapshot
from tests.pipelineutil import apply_only, envelope, ingest, put
from tests.stackutil import settings_env

pytestmark = pytest.mark.stack


@dataclass
class World:
    """Tenant A: o1 names Acme and Bolt, o2's two parts name Bolt and Cobalt; o3 is a linked
    object naming nothing. Tenant B: b1 names its own Acme."""

    a: uuid.UUID
    b: uuid.UUID
    o1: str
    o2: str
    o3: str
    b1: str
    p1: str
    p2: str
    acme: uuid.UUID
    bolt: uuid.UUID
    cobalt: uuid.UUID
    unnamed: uuid.UUID  # an entity no row mentions: never projected
    acme_b: uuid.UUID


def build(db: psycopg.Connection[Any], settings: Settings) -> World:
    a, b = uuid.uuid4(), uuid.uuid4()
    o1 = put(a, title="Acme and Bolt")
    o2 = put(a, kind="note", title="Supply notes", content=(
        "Bolt ships steel bolts to every yard along the northern coast each week.\n\n"
        "Cobalt Works buys them all and resells them to builders in the south."))
    o3 = put(a, title="Plain")
    b1 = put(b, title="Acme of tenant B")
    ids = [e["data"]["id"] for e in (o1, o2, o3, b1)]
    link = envelope("link.put", a, {"from": ids[0], "to": ids[2], "relation_type": "knows"})
    ingest(settings, [o1, o2, o3, b1, link])
    parts = [str(r[0]) for r in db.execute(
        "SELECT id FROM objects WHERE parent_id = %s ORDER BY position", (ids[1],)).fetchall()]
    assert len(parts) >= 2
    w = World(a, b, *ids, *parts[:2], acme=entity(db, a, "Acme"), bolt=entity(db, a, "Bolt"),
              cobalt=entity(db, a, "Cobalt Works"), unnamed=entity(db, a, "Nobody"),
              acme_b=entity(db, b, "Acme"))
    mention(db, a, w.o1, w.acme)
    mention(db, a, w.o1, w.bolt, start=9)
    mention(db, a, w.p1, w.bolt, field="content")
    mention(db, a, w.p2, w.cobalt, field="content")
    mention(db, b, w.b1, w.acme_b)
    edge(db, a, w.acme, w.bolt, "CO_OCCURS", weight=1.0, evidence=(w.o1,))
    edge(db, a, w.bolt, w.cobalt, "RELATES", predicate="supplies", evidence=(w.p1, w.p2))
    edge(db, a, w.cobalt, w.acme, "RELATES", predicate="partners", evidence=(w.p2,))
    edge(db, a, *sorted((w.acme, w.cobalt)), "POSSIBLY_SAME", status="held", confidence=0.5,
         method="trigram")
    edge(db, a, w.bolt, w.unnamed, "CO_OCCURS", weight=3.0)  # Nobody is not projected
    enqueue(db, a, MENTIONS_SYNC, [w.o1, w.o2])
    enqueue(db, b, MENTIONS_SYNC, [w.b1])
    enqueue(db, a, ENTITY_SYNC, [w.acme, w.bolt, w.cobalt, w.unnamed])
    enqueue(db, b, ENTITY_SYNC, [w.acme_b])
    relay(settings)
    return w


def test_projection_and_idempotent_reprojection(db: psycopg.Connection[Any],
                                                proj_settings: Settings) -> None:
    settings = proj_settings
    w = build(db, settings)
    snap = snapshot(settings)
    assert snap.entity_ids(w.a) == {str(w.acme), str(w.bolt), str(w.cobalt)}
    assert snap.entity_ids(w.b) == {str(w.acme_b)}
    acme = next(e for e in snap.entities if e.id == str(w.acme))
    assert (acme.namespace, acme.name, acme.norm, acme.label, acme.part_count) == (
        str(w.a), "Acme", "acme", "NAME", 1)
    assert snap.mention_pairs() == {(w.o1, str(w.acme)), (w.o1, str(w.bolt)),
                                    (w.o2, str(w.bolt)), (w.o2, str(w.cobalt)),
                                    (w.b1, str(w.acme_b))}
    o2_bolt = next(m for m in snap.mentions if (m.root_id, m.entity_id) == (w.o2, str(w.bolt)))
    assert (o2_bolt.count, o2_bolt.parts, o2_bolt.namespace) == (1, (w.p1,), str(w.a))
    edges = {e.key.edge_type: e for e in snap.edges if e.key.predicate != "partners"}
    assert snap.edge_keys() == {
        (str(w.acme), "CO_OCCURS", "", str(w.bolt)),
        (str(w.bolt), "RELATES", "supplies", str(w.cobalt)),
        (str(w.cobalt), "RELATES", "partners", str(w.acme)),
        (str(min(w.acme, w.cobalt)), "POSSIBLY_SAME", "", str(max(w.acme, w.cobalt)))}
    assert (edges["CO_OCCURS"].weight, edges["CO_OCCURS"].evidence) == (1.0, (w.o1,))
    assert edges["RELATES"].evidence == (w.p1, w.p2) and edges["RELATES"].weight is None
    same = edges["POSSIBLY_SAME"]
    assert (same.status, same.confidence, same.method, same.evidence) == (
        "held", 0.5, "trigram", None)
    assert verify(settings).clean

    # again, every aggregate, in reverse order and with the objects' own node rows
    enqueue(db, w.b, ENTITY_SYNC, [w.acme_b])
    enqueue(db, w.a, ENTITY_SYNC, [w.unnamed, w.cobalt, w.bolt, w.acme])
    enqueue(db, w.a, NODE_SYNC, [w.o2, w.o1])
    enqueue(db, w.a, MENTIONS_SYNC, [w.o2, w.o1])
    stats = relay(settings)
    assert stats.rows == 9
    assert (stats.entities_upserted, stats.mentions_upserted, stats.mentions_deleted,
            stats.entity_edges_upserted, stats.entity_edges_deleted,
            stats.entities_deleted) == (0, 0, 0, 0, 0, 0)  # nothing written twice
    assert snapshot(settings) == snap

    # the object readers see objects and links only
    writer = FalkorGraphWriter.from_settings(settings)
    assert writer.node_ids() == {w.o1, w.o2, w.o3, w.b1}
    assert [(e.from_id, e.relation_type, e.to_id) for e in writer.fetch_edges()] == [
        (w.o1, "knows", w.o3)]

    async def read() -> tuple[list[Any], list[Any]]:
        reader = FalkorGraphReader.from_settings(settings)
        try:
            walk = await reader.neighbors(w.a, [uuid.UUID(w.o1), uuid.UUID(w.o2)], [], "both",
                                          3, 100)
            found = await reader.find_entities_text(w.a, "Acme Bolt Cobalt", [], 10)
            return walk, found
        finally:
            await reader.aclose()

    walk, found = asyncio.run(read())
    assert [str(n.id) for n in walk] == [w.o3]
    assert {str(h.id) for h in found} == {w.o1, w.o2}  # objects, never NamedEntity nodes


def test_merge_moves_mentions_and_edges(db: psycopg.Connection[Any],
                                        proj_settings: Settings) -> None:
    settings = proj_settings
    w = build(db, settings)
    # Cobalt Works merged into Bolt, as the resolver does it: mentions and edges move over
    db.execute("UPDATE entities SET merged_into = %s WHERE id = %s", (w.bolt, w.cobalt))
    db.execute("UPDATE mentions SET entity_id = %s WHERE entity_id = %s", (w.bolt, w.cobalt))
    db.execute("DELETE FROM entity_edges WHERE from_id = %s OR to_id = %s", (w.cobalt, w.cobalt))
    edge(db, w.a, w.bolt, w.acme, "RELATES", predicate="partners", evidence=(w.p2,))
    enqueue(db, w.a, ENTITY_SYNC, [w.cobalt])  # the survivor and the roots follow
    relay(settings)
    snap = snapshot(settings)
    assert snap.entity_ids(w.a) == {str(w.acme), str(w.bolt)}
    assert snap.mention_pairs() == {(w.o1, str(w.acme)), (w.o1, str(w.bolt)),
                                    (w.o2, str(w.bolt)), (w.b1, str(w.acme_b))}
    o2_bolt = next(m for m in snap.mentions if (m.root_id, m.entity_id) == (w.o2, str(w.bolt)))
    assert (o2_bolt.count, o2_bolt.parts) == (2, tuple(sorted((w.p1, w.p2))))
    assert snap.edge_keys() == {(str(w.acme), "CO_OCCURS", "", str(w.bolt)),
                                (str(w.bolt), "RELATES", "partners", str(w.acme))}
    assert snap.entity_ids(w.b) == {str(w.acme_b)}  # the other tenant untouched
    assert verify(settings).clean


def test_delete_and_revive_object(db: psycopg.Connection[Any], proj_settings: Settings) -> None:
    settings = proj_settings
    w = build(db, settings)
    before = snapshot(settings)
    ingest(settings, [envelope("object.soft_delete", w.a, {"id": w.o1})])
    snap = snapshot(settings)
    # Acme was named by o1 only: its node goes, with its edges; Bolt is still named by o2
    assert snap.entity_ids(w.a) == {str(w.bolt), str(w.cobalt)}
    assert snap.mention_pairs() == {(w.o2, str(w.bolt)), (w.o2, str(w.cobalt)),
                                    (w.b1, str(w.acme_b))}
    assert snap.edge_keys() == {(str(w.bolt), "RELATES", "supplies", str(w.cobalt))}
    assert verify(settings).clean

    ingest(settings, [put(w.a, id=w.o1, title="Acme and Bolt")])  # revived
    snap = snapshot(settings)
    assert snap.entities == before.entities
    assert snap.mention_pairs() == before.mention_pairs()
    assert snap.edges == before.edges
    assert verify(settings).clean


def test_the_lanes_run_side_by_side_and_a_deleted_node_hands_its_entities_over(
        db: psycopg.Connection[Any], proj_settings: Settings) -> None:
    """The relay's two lanes hold a lock each: the object lane runs while the entity lane is
    busy elsewhere. It removes a deleted node (with its MENTIONS) and hands the entities the
    graph said it mentioned to the entity lane, as node-only `entity_sync` rows of its
    tenant; the entity lane then removes the one that lost its last live mention."""
    settings = proj_settings
    w = build(db, settings)
    apply_only(settings, [envelope("object.soft_delete", w.a, {"id": w.o1})])
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (LANE_LOCKS[ENTITIES],))
        assert relay(settings).skipped  # both lanes: one of them is taken
        stats = relay(settings, lanes=(OBJECTS,))
        assert (stats.skipped, stats.nodes_deleted, stats.handed) == (False, 1, 2)
        assert (stats.entities_upserted, stats.entities_deleted) == (0, 0)
        pending = {(ns, eid, op, json.dumps(payload)) for ns, eid, op, payload in db.execute(
            "SELECT namespace_id, aggregate_id, op, payload FROM outbox"
            " WHERE done_at IS NULL").fetchall()}
        assert pending == {(w.a, w.acme, ENTITY_SYNC, '{"edges": []}'),
                           (w.a, w.bolt, ENTITY_SYNC, '{"edges": []}')}
        snap = snapshot(settings)
        assert str(w.acme) in snap.entity_ids(w.a)  # the entity lane has not run
        assert (w.o1, str(w.acme)) not in snap.mention_pairs()  # went with the node
    stats = relay(settings, lanes=(ENTITIES,))
    assert (stats.rows, stats.entities_deleted) == (2, 1)
    snap = snapshot(settings)
    assert snap.entity_ids(w.a) == {str(w.bolt), str(w.cobalt)}
    assert snap.entity_ids(w.b) == {str(w.acme_b)}  # the other tenant untouched
    assert snap.edge_keys() == {(str(w.bolt), "RELATES", "supplies", str(w.cobalt))}
    assert verify(settings).clean


def test_verify_repair_and_rebuild(db: psycopg.Connection[Any], proj_settings: Settings) -> None:
    settings = proj_settings
    w = build(db, settings)
    before = snapshot(settings)
    graph = connect(settings).select_graph(settings.graph_name)
    graph.query("MATCH (:NamedEntity {id: $a})-[e:CO_OCCURS]->() DELETE e", {"a": str(w.acme)})
    graph.query("MATCH (:Entity {id: $o})-[m:MENTIONS]->(:NamedEntity {id: $e}) DELETE m",
                {"o": w.o2, "e": str(w.cobalt)})
    graph.query("MATCH (:Entity {id: $o})-[m:MENTIONS]->(:NamedEntity {id: $e}) SET m.count = 9",
                {"o": w.o1, "e": str(w.acme)})
    graph.query("MATCH (e:NamedEntity {id: $e}) SET e.name = 'Wrong'", {"e": str(w.bolt)})
    ghost = str(uuid.uuid4())
    graph.query("CREATE (:NamedEntity {id: $id, namespace: $ns, name: 'Ghost'})",
                {"id": ghost, "ns": str(w.b)})
    drift = verify(settings).entities
    assert drift.edges.missing and drift.edges.missing[0].edge_type == "CO_OCCURS"
    assert drift.mentions.missing == [(w.o2, str(w.cobalt))]
    assert drift.mentions.stale == [(w.o1, str(w.acme))]
    assert drift.entities.stale == [str(w.bolt)]
    assert drift.entities.extra == [ghost]
    assert set(drift.namespaces) == {str(w.a), str(w.b)}  # counts differ in both
    cli = subprocess.run([sys.executable, "-m", "pipeline.cli", "verify", "--sample", "0"],
                         env={**settings_env(settings), "BRAINSTREAM_GRAPH_NAME":
                              settings.graph_name}, capture_output=True, text=True,
                         timeout=120, check=False)
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert "missing MENTIONS" in cli.stdout and f"namespace {w.b}" in cli.stdout
    done = repair(settings, verify(settings))
    assert (done["entities"], done["mention_roots"]) == (3, 2)  # acme, bolt, ghost; o1, o2
    relay(settings)
    assert verify(settings).clean
    assert snapshot(settings) == before

    graph.query("MATCH (n) DETACH DELETE n")  # the graph is lost
    assert not verify(settings).clean
    rebuild_graph(settings)
    assert verify(settings).clean
    assert snapshot(settings) == before


def _narrowed(db: psycopg.Connection[Any], ns: uuid.UUID, eid: uuid.UUID,
              partners: list[uuid.UUID]) -> None:
    """An entity_sync row as the extraction write-back enqueues it: its edges with `partners`
    changed, and only those."""
    outbox.enqueue_many(db, [outbox.Entry(ns, eid, ENTITY_SYNC, entity_sync_payload(partners))])


def test_a_narrowed_entity_sync_resyncs_the_pairs_it_lists(db: psycopg.Connection[Any],
                                                          proj_settings: Settings) -> None:
    """The write-back tells the relay which pairs of an entity it recounted; the relay re-syncs
    those edges and reads no other (a hub's thousands of edges stay unread). A node new to the
    graph still gets every edge, and a row that lists nothing re-syncs every edge."""
    settings = proj_settings
    w = build(db, settings)
    before = snapshot(settings)
    db.execute("UPDATE entity_edges SET weight = 2.0 WHERE from_id = %s AND to_id = %s",
               (w.acme, w.bolt))
    # a change the narrowed rows do not list: the relay does not read it
    db.execute("UPDATE entity_edges SET evidence = %s::uuid[] WHERE predicate = 'partners'",
               ([w.p1],))
    _narrowed(db, w.a, w.acme, [w.bolt])
    _narrowed(db, w.a, w.bolt, [w.acme])
    stats = relay(settings)
    assert (stats.entity_edges_upserted, stats.entity_edges_deleted) == (1, 0)
    snap = snapshot(settings)
    weights = {e.key: e.weight for e in snap.edges if e.key.edge_type == "CO_OCCURS"}
    assert list(weights.values()) == [2.0]
    assert {e.key: e for e in snap.edges if e.key.predicate == "partners"} == {
        e.key: e for e in before.edges if e.key.predicate == "partners"}
    assert not verify(settings).clean  # the unlisted change is drift until its own sync

    # a node new to the graph gets every edge, whatever its row lists
    dynamo = entity(db, w.a, "Dynamo")
    mention(db, w.a, w.o1, dynamo, start=20)
    edge(db, w.a, *sorted((w.acme, dynamo)), "CO_OCCURS", weight=1.0, evidence=(w.o1,))
    edge(db, w.a, *sorted((w.bolt, dynamo)), "CO_OCCURS", weight=1.0, evidence=(w.o1,))
    enqueue(db, w.a, MENTIONS_SYNC, [w.o1])
    _narrowed(db, w.a, dynamo, [w.acme])
    # and a row listing nothing (merges, repairs, relations) re-syncs every edge of Cobalt
    enqueue(db, w.a, ENTITY_SYNC, [w.cobalt])
    relay(settings)
    snap = snapshot(settings)
    assert {k for k in snap.edge_keys() if str(dynamo) in k} == {
        (str(min(w.acme, dynamo)), "CO_OCCURS", "", str(max(w.acme, dynamo))),
        (str(min(w.bolt, dynamo)), "CO_OCCURS", "", str(max(w.bolt, dynamo)))}
    assert verify(settings).clean
    assert snap.entity_ids(w.b) == before.entity_ids(w.b)  # the other tenant untouched
