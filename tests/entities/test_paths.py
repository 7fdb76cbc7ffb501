"""POST /v1/paths on the real stack: paths of 1..4 hops over links, MENTIONS and entity edges,
each edge citing what states it; bounds named; soft-deleted objects never on a path nor cited;
two tenants."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from pipeline.domain.paths import NodeRef, PathAnswer, PathQuery
from pipeline.postgres.pool import make_async_pool
from pipeline.retrieval.graph.paths import PathConfig, PathFinder
from pipeline.retrieval.store.paths import PgPathGraph
from pipeline.settings import Settings
from tests.apiutil import api_client, ok
from tests.entities.holdutil import hold_extraction
from tests.entities.pathsutil import World, build_world, entity_edge, mention
from tests.pipelineutil import envelope, ingest

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def worlds(catalog: Settings) -> dict[str, World]:
    """Two tenants with the same graph (and names), and a third for bounds and hubs."""
    out = {name: build_world(catalog) for name in ("a", "b", "c")}
    for world in out.values():  # O5 -see_also- O7: O7 is 5 hops from O1
        world.objects["O7"] = str(uuid.uuid4())
        ingest(catalog, [
            envelope("object.put", world.namespace, {"id": world.objects["O7"],
                                                     "kind": "company", "title": "Far away"}),
            envelope("link.put", world.namespace, {"from": world.objects["O5"],
                                                   "to": world.objects["O7"],
                                                   "relation_type": "see_also"})])
    _hub_chain(catalog, out["c"])
    return out


def _hub_chain(settings: Settings, world: World) -> None:
    """H1 and H2 name the hub entity (named in far more rows than the namespace holds);
    H2 -next- H3 -next- H4."""
    ns = world.namespace
    ids = {n: str(uuid.uuid4()) for n in ("H1", "H2", "H3", "H4")}
    world.objects.update(ids)
    ingest(settings, [
        *[envelope("object.put", ns, {"id": ids[n], "kind": "note", "title": n,
                                      "content": f"{n} names Polaris."}) for n in ids],
        envelope("link.put", ns, {"from": ids["H2"], "to": ids["H3"], "relation_type": "next"}),
        envelope("link.put", ns, {"from": ids["H3"], "to": ids["H4"], "relation_type": "next"})])
    hold_extraction(settings, ns, keep=world.entities.values())
    hub = world.entities["Hub"] = str(uuid.uuid4())
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label, part_count)"
                     " VALUES (%s, %s, 'Polaris', 'polaris', 'NAME', 1000)", (hub, ns))
        for n in ("H1", "H2"):
            mention(conn, ns, ids[n], f"{n} names Polaris.", hub, "Polaris", "NAME")


def _types(path: dict[str, Any]) -> list[str]:
    return [e["type"] for e in path["edges"]]


def test_paths_of_one_to_four_hops_cite_their_evidence(worlds_client: TestClient,
                                                       worlds: dict[str, World]) -> None:
    a = worlds["a"]
    one = ok(a.paths(worlds_client, ["O1"], ["O2"]))
    assert one["status"] == "found" and not one["search_incomplete"]
    link = one["paths"][0]["edges"][0]
    assert (one["paths"][0]["hops"], link["type"], link["relation_type"]) == (1, "LINK", "cites")
    assert link["evidence"][0]["note"] == "the archive cites the crew notes"
    assert link["evidence"][0]["meta"]["confidence"] == 0.9 and link["strength"] == 0.9

    two = ok(a.paths(worlds_client, ["O1"], ["X1"]))["paths"][0]
    assert two["hops"] == 2 and _types(two) == ["LINK", "MENTIONS"]
    cite = two["edges"][1]["evidence"][0]
    # the part states it, the object is its parent; the span is the name as written
    assert (cite["row_id"], cite["object_id"]) == (a.objects["O2p"], a.objects["O2"])
    assert cite["text"] == "Neil Armstrong" and "Neil Armstrong flew" in cite["snippet"]
    assert [n["type"] for n in two["nodes"]] == ["object", "object", "entity"]
    assert two["nodes"][2]["name"] == "Neil Armstrong" and two["nodes"][0]["title"]

    three = ok(a.paths(worlds_client, ["O1"], ["X3"]))["paths"][0]
    assert three["hops"] == 3 and _types(three) == ["LINK", "MENTIONS", "RELATES"]
    relates = three["edges"][2]
    assert relates["predicate"] == "launched_by" and relates["forward"]
    assert relates["evidence"][0]["row_id"] == a.objects["O4"]
    assert "launched by NASA" in relates["evidence"][0]["snippet"]

    four = ok(a.paths(worlds_client, ["O1"], ["O5"]))
    assert four["status"] == "found"
    best = four["paths"][0]
    assert best["hops"] == 4 and _types(best) == ["LINK", "MENTIONS", "RELATES", "MENTIONS"]
    assert [n["id"] for n in best["nodes"]] == [a.id(n) for n in ("O1", "O2", "X2", "X3", "O5")]
    # MENTIONS is stored object -> entity: walking entity -> object goes against it
    assert not best["edges"][3]["forward"]
    assert best["edges"][3]["evidence"][0]["row_id"] == a.objects["O5"]


def test_paths_rank_fewest_hops_first(worlds_client: TestClient, worlds: dict[str, World]) -> None:
    a = worlds["a"]
    answer = ok(a.paths(worlds_client, ["O1"], ["X2"], k=5))
    hops = [p["hops"] for p in answer["paths"]]
    assert hops == sorted(hops) and hops[0] == 2 and 3 in hops  # direct, and via X1
    co = next(p for p in answer["paths"] if p["hops"] == 3)["edges"][2]
    assert co["type"] == "CO_OCCURS" and co["evidence"][0]["row_id"] == a.objects["O2p"]
    assert ok(a.paths(worlds_client, ["O1"], ["X2"], k=1))["paths"][0]["hops"] == 2


def test_bounds_beyond_max_length_and_not_connected(worlds_client: TestClient,
                                                    worlds: dict[str, World]) -> None:
    a = worlds["a"]
    beyond = ok(a.paths(worlds_client, ["O1"], ["O7"]))  # 5 hops away
    assert (beyond["status"], beyond["paths"], beyond["shortest_beyond"]) == (
        "connected_beyond_max_length", [], 5)
    short = ok(a.paths(worlds_client, ["O1"], ["X3"], max_hops=2))
    assert (short["status"], short["shortest_beyond"]) == ("connected_beyond_max_length", 3)
    alone = ok(a.paths(worlds_client, ["O1"], ["O6"]))
    assert (alone["status"], alone["paths"], alone["search_incomplete"]) == (
        "not_connected", [], False)


def test_soft_deleted_objects_are_never_on_a_path_nor_cited(worlds_client: TestClient,
                                                            worlds: dict[str, World]) -> None:
    a = worlds["a"]
    deleted = a.objects["Odel"]
    # through Odel, O5 would be 2 hops from O1 and X3 2 from X1 (a RELATES only Odel states)
    for target in ("O5", "X3", "X1"):
        answer = ok(a.paths(worlds_client, ["O1"], [target], k=10))
        assert answer["paths"]
        for path in answer["paths"]:
            assert deleted not in [n["id"] for n in path["nodes"]]
            cited = [c[key] for e in path["edges"] for c in e["evidence"]
                     for key in ("row_id", "object_id")]
            assert deleted not in cited
            assert "worked_for" not in [e["predicate"] for e in path["edges"]]
    assert ok(a.paths(worlds_client, ["O1"], ["O5"]))["paths"][0]["hops"] == 4
    gone = a.paths(worlds_client, ["Odel"], ["O5"])
    assert gone.status_code == 404 and gone.json()["error"]["field"] == "from[0]"


def test_two_tenants_see_only_their_own_graph(worlds_client: TestClient,
                                              worlds: dict[str, World]) -> None:
    a, b = worlds["a"], worlds["b"]
    mine = set(a.objects.values()) | set(a.entities.values())
    for path in ok(a.paths(worlds_client, ["O1"], ["O5"], k=10))["paths"]:
        assert {n["id"] for n in path["nodes"]} <= mine
        assert {c["row_id"] for e in path["edges"] for c in e["evidence"]
                if c["row_id"]} <= mine
    # B's ids do not exist for A: not found, naming the endpoint
    foreign = worlds_client.post("/v1/paths", json={"from": [a.objects["O1"]],
                                                    "to": [b.objects["O5"]]}, headers=a.headers)
    assert foreign.status_code == 404, foreign.text
    assert foreign.json()["error"] == {"code": "not_found", "field": "to[0]",
                                       "message": f"no object or entity {b.objects['O5']}"}
    assert ok(b.paths(worlds_client, ["O1"], ["O5"]))["paths"][0]["hops"] == 4


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"to": ["O2"]}, 422, "from"),
    ({"from": ["O1"], "to": ["O2"], "max_hops": 5}, 422, "max_hops"),
    ({"from": ["O1"], "to": ["O2"], "k": 0}, 422, "k"),
    ({"from": ["O1"], "to": ["O1"]}, 422, "to"),
    ({"from": ["O2p"], "to": ["O1"]}, 422, "from[0]"),
    ({"from": ["O1"], "to": ["O2"], "depth": 2}, 422, "depth"),
])
def test_bad_requests_name_the_field(worlds_client: TestClient, worlds: dict[str, World],
                                     body: dict[str, Any], status: int, field: str) -> None:
    a = worlds["a"]
    sent = {k: [a.id(n) for n in v] if k in ("from", "to") else v for k, v in body.items()}
    response = worlds_client.post("/v1/paths", json=sent, headers=a.headers)
    assert response.status_code == status, response.text
    assert response.json()["error"]["field"] == field


def _find(settings: Settings, world: World, config: PathConfig, source: str, target: str
          ) -> PathAnswer:
    async def run() -> PathAnswer:
        pool = await make_async_pool(settings, max_size=2)
        try:
            finder = PathFinder(PgPathGraph(pool), config)
            return await finder.find(world.namespace, PathQuery(
                (uuid.UUID(world.id(source)),), (uuid.UUID(world.id(target)),)))
        finally:
            await pool.close()
    return asyncio.run(run())


@pytest.mark.parametrize(("config", "cut"), [
    (PathConfig(max_nodes=3), "max_nodes"),
    (PathConfig(max_edges=2), "max_edges"),
    (PathConfig(deadline=1e-9), "deadline"),
])
def test_a_bound_that_cuts_the_search_is_named(catalog: Settings, worlds: dict[str, World],
                                               config: PathConfig, cut: str) -> None:
    answer = _find(catalog, worlds["c"], config, "O1", "O5")
    assert (answer.paths, answer.status, answer.search_incomplete) == (
        (), "search_incomplete", True)
    assert cut in answer.cut_by


def test_hubs_are_reached_not_expanded_and_reported(catalog: Settings,
                                                    worlds: dict[str, World]) -> None:
    c = worlds["c"]
    with psycopg.connect(catalog.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute("UPDATE entities SET part_count = 1000 WHERE id = %s", (c.entities["X2"],))
    answer = _find(catalog, c, PathConfig(hub_min_parts=20), "O1", "X3")
    hub = uuid.UUID(c.entities["X2"])
    assert [h.id for h in answer.hubs_skipped] == [hub]
    # the two sides met at the hub: the path through it is still found
    assert answer.status == "found" and NodeRef("entity", hub) in answer.paths[0].nodes
    # H1 -MENTIONS- Hub -MENTIONS- H2 -link- H3 -link- H4: from H1 the search stops at the
    # hub, so the path is only found once the other side reaches the hub (the probe past the
    # layers the search had planned); without the probe it says the hub may hide a path
    found = _find(catalog, c, PathConfig(hub_min_parts=20), "H1", "H4")
    assert (found.status, [p.hops for p in found.paths]) == ("found", [4])
    cut = _find(catalog, c, PathConfig(hub_min_parts=20, beyond_hops=0), "H1", "H4")
    assert (cut.paths, cut.status, cut.cut_by) == ((), "search_incomplete", ("hubs",))
    assert [h.id for h in cut.hubs_skipped] == [uuid.UUID(c.entities["Hub"])]


def test_possibly_same_is_walked_once_verified_and_merged_entities_resolve(
        catalog: Settings) -> None:
    d = build_world(catalog)
    luna_text = "Luna is the Latin name."
    d.objects["OL"] = str(uuid.uuid4())
    ingest(catalog, [envelope("object.put", d.namespace, {"id": d.objects["OL"], "kind": "note",
                                                          "title": "Latin",
                                                          "content": luna_text})])
    # the session's extract worker may have written its own "Luna" for the new row meanwhile
    # (the hand-made one below then broke the unique name, 1 run in 5)
    hold_extraction(catalog, d.namespace, keep=d.entities.values())
    luna = d.entities["Y"] = str(uuid.uuid4())
    with psycopg.connect(catalog.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label, part_count)"
                     " VALUES (%s, %s, 'Luna', 'luna', 'NAME', 1)", (luna, d.namespace))
        mention(conn, d.namespace, d.objects["OL"], luna_text, luna, "Luna", "NAME")
        entity_edge(conn, d.namespace, d.entities["X4"], luna, "POSSIBLY_SAME",
                    evidence=[d.objects["O2p"]], status="held")
    with api_client(catalog, [d]) as own:
        held = ok(d.paths(own, ["O1"], ["OL"]))
        assert (held["status"], held["paths"]) == ("not_connected", [])
        with psycopg.connect(catalog.effective_postgres_dsn, autocommit=True) as conn:
            conn.execute("UPDATE entity_edges SET status = 'verified' WHERE namespace_id = %s"
                         " AND edge_type = 'POSSIBLY_SAME'", (d.namespace,))
        verified = ok(d.paths(own, ["O1"], ["OL"]))["paths"][0]
        assert _types(verified) == ["LINK", "MENTIONS", "POSSIBLY_SAME", "MENTIONS"]
        assert verified["nodes"][2]["name"] == "Moon"
        # a merged entity is answered as the one it was merged into
        with psycopg.connect(catalog.effective_postgres_dsn, autocommit=True) as conn:
            conn.execute("UPDATE entities SET merged_into = %s WHERE id = %s",
                         (d.entities["X2"], d.entities["X1"]))
        merged = ok(d.paths(own, ["O1"], ["X1"]))["paths"][0]
        assert merged["nodes"][-1]["id"] == d.entities["X2"]
        assert d.entities["X1"] not in [n["id"] for p in ok(d.paths(
            own, ["O1"], ["X3"], k=10))["paths"] for n in p["nodes"]]
