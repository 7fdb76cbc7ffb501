"""FalkorGraphWriter on the real FalkorDB of the test stack, one fresh graph per test."""

from __future__ import annotations

import random
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import falkordb
import pytest

from pipeline.domain.errors import InvalidInput, Unavailable
from pipeline.domain.projection import EdgeKey, EdgeState, NodeState
from pipeline.graph.falkordb.schema import connect, index_rows
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.settings import Settings
from tests.graph.graphutil import free_port as _free_port, private_falkordb as own_falkordb
from tests.stackutil import make_settings

pytestmark = pytest.mark.stack


def _vec(seed: int, dim: int) -> tuple[float, ...]:
    rng = random.Random(seed)
    values = [rng.uniform(-1.0, 1.0) for _ in range(dim)]
    norm = sum(v * v for v in values) ** 0.5
    return tuple(v / norm for v in values)


def _node(i: int, dim: int, *, ns: str = "ns1", seed: int | None = None,
          hash_: str | None = None) -> NodeState:
    seed = i if seed is None else seed
    return NodeState(
        id=f"node-{i}", namespace=ns, kind="doc", title=f"Title {i}",
        index_text=f"index text of node {i}", embedding=_vec(seed, dim),
        embedded_hash=hash_ or f"hash-{seed}", updated_at="2026-01-01T00:00:00Z",
    )


def _edge(from_id: str, to_id: str, relation_type: str = "MENTIONS", *, ns: str = "ns1",
          note: str | None = "a plain note", confidence: float = 0.0) -> EdgeState:
    return EdgeState(
        from_id=from_id, to_id=to_id, relation_type=relation_type, namespace=ns, note=note,
        status="active", role="source", confidence=confidence, evidence_id="ev-1",
        created_at="2026-01-01T00:00:00Z", updated_at="2026-01-02T00:00:00Z",
    )


def _vector_hits(graph: Any, vector: tuple[float, ...], k: int) -> list[str]:
    result = graph.query(
        "CALL db.idx.vector.queryNodes('Entity', 'embedding', $k, vecf32($v)) "
        "YIELD node, score RETURN node.id", {"k": k, "v": list(vector)})
    return [str(row[0]) for row in result.result_set]


def _probe_full(graph: Any, nodes: list[NodeState]) -> bool:
    """True when `queryNodes(k=N)` returns all N vector nodes for every node's own vector.

    FalkorDB 4.16.3 leaves an orphan index entry on any write to a vector-indexed node, after
    which such a query returns fewer than k: this probe sees every rewrite.
    """
    k = len(nodes)
    return all(
        len(_vector_hits(graph, n.embedding, k)) == k for n in nodes if n.embedding is not None
    )


def _assert_close(a: tuple[float, ...] | None, b: tuple[float, ...] | None) -> None:
    assert a is not None and b is not None and len(a) == len(b)
    # Stored as float32.
    assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-6


@pytest.fixture()
def db(graph_settings: Settings) -> falkordb.FalkorDB:
    return connect(graph_settings)


@pytest.fixture()
def graph(db: falkordb.FalkorDB, graph_settings: Settings) -> Any:
    return db.select_graph(graph_settings.graph_name)


@pytest.fixture()
def writer(db: falkordb.FalkorDB, graph_settings: Settings) -> FalkorGraphWriter:
    return FalkorGraphWriter(db, graph_settings.graph_name)


# -- capabilities -------------------------------------------------------------------------------


def test_capabilities_resolved_at_construction(writer: FalkorGraphWriter, dim: int) -> None:
    assert writer.edge_fulltext is True
    assert writer.vector_dim == dim


# -- nodes --------------------------------------------------------------------------------------


def test_upsert_creates_props_and_embedding(writer: FalkorGraphWriter, graph: Any,
                                            dim: int) -> None:
    nodes = [_node(i, dim) for i in range(4)]
    writer.upsert_nodes(nodes)
    assert (writer.nodes_written, writer.embeddings_written) == (4, 4)
    stored = writer.fetch_node("node-2")
    assert stored is not None
    assert replace(stored, embedding=None) == replace(nodes[2], embedding=None)
    _assert_close(stored.embedding, nodes[2].embedding)
    assert writer.node_exists("node-2") and not writer.node_exists("node-missing")
    assert writer.fetch_node("node-missing") is None
    assert writer.node_ids() == {n.id for n in nodes}
    assert writer.node_ids("other") == set()
    for node in nodes:
        assert node.embedding is not None
        assert _vector_hits(graph, node.embedding, 1) == [node.id]
    assert _probe_full(graph, nodes)


def test_probe_sees_any_write_to_a_vector_node(writer: FalkorGraphWriter, graph: Any,
                                               dim: int) -> None:
    """Control for the tests below: FalkorDB 4.16.3 degrades the index on every SET.

    If this fails after a FalkorDB upgrade, the bug is fixed upstream and the probe (and the
    writer's avoidance of no-op writes) can be relaxed.
    """
    nodes = [_node(i, dim) for i in range(4)]
    writer.upsert_nodes(nodes)
    assert _probe_full(graph, nodes)
    graph.query("MATCH (n:Entity {id: 'node-0'}) SET n.title = n.title")
    assert not _probe_full(graph, nodes)


def test_falkordb_skips_overwriting_a_close_vector(graph: Any) -> None:
    """Control for `test_changed_hash_rewrites_embedding`: a plain SET of a new normalized vector
    over an old one is silently ignored by FalkorDB 4.16.3 (components compared after rounding).

    If this fails after a FalkorDB upgrade, the writer's REMOVE-before-SET can be dropped.
    """
    graph.query("CREATE (:Probe {id: 'p', v: vecf32([0.5, 0.25, 0.125])})")
    graph.query("MATCH (n:Probe {id: 'p'}) SET n.v = vecf32([-0.25, 0.4, 0.125])")
    stored = graph.query("MATCH (n:Probe {id: 'p'}) RETURN n.v").result_set[0][0]
    assert stored == [0.5, 0.25, 0.125]


def test_replay_writes_nothing(writer: FalkorGraphWriter, graph: Any, dim: int) -> None:
    nodes = [_node(i, dim) for i in range(4)]
    writer.upsert_nodes(nodes)
    writer.upsert_nodes(nodes)
    writer.upsert_nodes(list(reversed(nodes)))
    assert (writer.nodes_written, writer.embeddings_written) == (4, 4)
    assert _probe_full(graph, nodes)
    assert nodes[0].embedding is not None
    assert _vector_hits(graph, nodes[0].embedding, 10).count("node-0") == 1


def test_unchanged_hash_keeps_embedding(writer: FalkorGraphWriter, graph: Any,
                                        dim: int) -> None:
    nodes = [_node(i, dim) for i in range(4)]
    writer.upsert_nodes(nodes)
    # Same hash but a different vector: the writer must trust the hash and keep the stored one.
    changed = replace(nodes[1], title="Renamed", embedding=_vec(99, dim))
    writer.upsert_nodes([changed])
    assert (writer.nodes_written, writer.embeddings_written) == (5, 4)
    stored = writer.fetch_node("node-1")
    assert stored is not None and stored.title == "Renamed"
    _assert_close(stored.embedding, nodes[1].embedding)
    assert nodes[1].embedding is not None
    hits = _vector_hits(graph, nodes[1].embedding, 10)
    assert hits[0] == "node-1" and hits.count("node-1") == 1


def test_changed_hash_rewrites_embedding(writer: FalkorGraphWriter, graph: Any,
                                         dim: int) -> None:
    nodes = [_node(i, dim) for i in range(4)]
    writer.upsert_nodes(nodes)
    changed = _node(1, dim, seed=77)
    writer.upsert_nodes([changed])
    assert (writer.nodes_written, writer.embeddings_written) == (5, 5)
    stored = writer.fetch_node("node-1")
    assert stored is not None and stored.embedded_hash == "hash-77"
    _assert_close(stored.embedding, changed.embedding)
    assert changed.embedding is not None
    hits = _vector_hits(graph, changed.embedding, 10)
    assert hits[0] == "node-1" and hits.count("node-1") == 1


def test_embedding_removed_and_absent(writer: FalkorGraphWriter, graph: Any, dim: int) -> None:
    nodes = [_node(i, dim) for i in range(3)]
    bare = replace(_node(9, dim), embedding=None, embedded_hash=None)
    writer.upsert_nodes([*nodes, bare])
    assert (writer.nodes_written, writer.embeddings_written) == (4, 3)
    writer.upsert_nodes([replace(nodes[0], embedding=None, embedded_hash=None)])
    assert (writer.nodes_written, writer.embeddings_written) == (5, 4)
    stored = writer.fetch_node("node-0")
    assert stored is not None and stored.embedding is None and stored.embedded_hash is None
    assert nodes[0].embedding is not None
    assert "node-0" not in _vector_hits(graph, nodes[0].embedding, 10)


def test_repeated_ids_in_a_batch_last_wins(db: falkordb.FalkorDB,
                                           graph_settings: Settings, dim: int) -> None:
    writer = FalkorGraphWriter(db, graph_settings.graph_name, batch_size=2)
    nodes = [_node(i, dim) for i in range(5)]
    writer.upsert_nodes([*nodes, replace(nodes[0], title="last")])
    assert writer.node_ids() == {n.id for n in nodes}
    stored = writer.fetch_node("node-0")
    assert stored is not None and stored.title == "last"
    assert (writer.nodes_written, writer.embeddings_written) == (5, 5)


def test_wrong_dimension_is_invalid(writer: FalkorGraphWriter, dim: int) -> None:
    bad = replace(_node(1, dim), embedding=(1.0, 0.0))
    with pytest.raises(InvalidInput) as info:
        writer.upsert_nodes([_node(0, dim), bad])
    assert info.value.field == "embedding"
    assert writer.node_ids() == set()


def test_upsert_keeps_incident_edges(writer: FalkorGraphWriter, dim: int) -> None:
    nodes = [_node(i, dim) for i in range(3)]
    writer.upsert_nodes(nodes)
    edges = [_edge("node-0", "node-1"), _edge("node-2", "node-0", "CITES")]
    writer.upsert_edges(edges)
    writer.upsert_nodes([replace(nodes[0], title="changed"), _node(0, dim, seed=5)])
    assert writer.fetch_edges() == sorted(
        edges, key=lambda e: (e.from_id, e.relation_type, e.to_id))


# -- edges --------------------------------------------------------------------------------------


def test_edge_before_node_creates_placeholder(writer: FalkorGraphWriter, graph: Any,
                                              dim: int) -> None:
    edge = _edge("node-0", "node-1")
    writer.upsert_edges([edge])
    placeholder = writer.fetch_node("node-0")
    assert placeholder is not None and placeholder.is_placeholder
    assert placeholder.namespace == "ns1" and placeholder.embedding is None
    assert writer.node_ids("ns1") == {"node-0", "node-1"}
    nodes = [_node(0, dim), _node(1, dim)]
    writer.upsert_nodes(nodes)
    assert writer.embeddings_written == 2
    stored = writer.fetch_node("node-0")
    assert stored is not None and not stored.is_placeholder
    assert replace(stored, embedding=None) == replace(nodes[0], embedding=None)
    assert writer.fetch_edges() == [edge]
    assert nodes[0].embedding is not None
    assert _vector_hits(graph, nodes[0].embedding, 1) == ["node-0"]
    assert _probe_full(graph, nodes)


def test_edge_metadata_round_trips(writer: FalkorGraphWriter) -> None:
    first = _edge("a", "b", confidence=0.75)
    bare = EdgeState(from_id="b", to_id="b", relation_type="SELF", namespace="ns2", note=None,
                     status=None, role=None, confidence=0.0, evidence_id=None,
                     created_at="2026-01-01T00:00:00Z", updated_at="2026-01-01T00:00:00Z")
    writer.upsert_edges([first, bare])
    assert writer.fetch_edges() == [first, bare]
    assert writer.fetch_edges("ns2") == [bare]
    updated = replace(first, note="revised note", status="retracted", confidence=0.5,
                      updated_at="2026-02-01T00:00:00Z")
    writer.upsert_edges([updated])
    assert writer.fetch_edges("ns1") == [updated]  # updated in place, not duplicated


def test_edge_note_fulltext_per_type(writer: FalkorGraphWriter, db: falkordb.FalkorDB,
                                     graph: Any, graph_settings: Settings) -> None:
    writer.upsert_edges([
        _edge("a", "b", "MENTIONS", note="the quarterly budget review"),
        _edge("a", "c", "CITES", note="a budget footnote"),
        _edge("b", "c", "CITES", note="unrelated words"),
    ])
    rows = index_rows(graph)
    indexed = {r["label"] for r in rows
               if r["entitytype"] == "RELATIONSHIP" and "FULLTEXT" in r["types"].get("note", [])}
    assert indexed == {"MENTIONS", "CITES"}

    def text_hits(relation_type: str, word: str) -> list[tuple[str, str]]:
        result = graph.query(
            "CALL db.idx.fulltext.queryRelationships($t, $q) YIELD relationship "
            "RETURN startNode(relationship).id, endNode(relationship).id",
            {"t": relation_type, "q": word})
        return sorted((str(r[0]), str(r[1])) for r in result.result_set)

    assert text_hits("MENTIONS", "quarterly") == [("a", "b")]
    assert text_hits("CITES", "budget") == [("a", "c")]
    assert text_hits("CITES", "quarterly") == []
    # A second writer (another relay process) finds the indexes and creates nothing twice.
    other = FalkorGraphWriter(db, graph_settings.graph_name)
    other.upsert_edges([_edge("c", "a", "CITES", note="budget again")])
    assert text_hits("CITES", "budget") == [("a", "c"), ("c", "a")]
    assert len(index_rows(graph)) == len(rows)


def test_delete_nodes_removes_incident_edges(writer: FalkorGraphWriter, dim: int) -> None:
    writer.upsert_nodes([_node(i, dim) for i in range(3)])
    writer.upsert_edges([_edge("node-0", "node-1"), _edge("node-1", "node-2"),
                         _edge("node-2", "node-0", "CITES")])
    writer.delete_nodes(["node-1", "node-missing"])
    writer.delete_nodes(["node-1"])
    assert writer.node_ids() == {"node-0", "node-2"}
    assert [e.key for e in writer.fetch_edges()] == [EdgeKey("node-2", "CITES", "node-0")]
    writer.delete_nodes([])


def test_delete_edges_idempotent(writer: FalkorGraphWriter) -> None:
    keep = _edge("a", "b", "CITES")
    gone = _edge("a", "b")
    writer.upsert_edges([keep, gone])
    for _ in range(2):
        writer.delete_edges([gone.key, EdgeKey("a", "NEVER_SEEN", "b"), EdgeKey("x", "CITES", "y")])
        assert writer.fetch_edges() == [keep]
    assert writer.node_ids() == {"a", "b"}


@pytest.mark.parametrize("relation_type", [
    "", "1ABC", "has space", "a-b", "ÄBC", "x`]->() DETACH DELETE n //", "A" * 64,
])
def test_bad_relation_type_is_invalid(writer: FalkorGraphWriter, relation_type: str) -> None:
    with pytest.raises(InvalidInput) as info:
        writer.upsert_edges([_edge("a", "b"), _edge("a", "c", relation_type)])
    assert info.value.field == "relation_type"
    assert writer.node_ids() == set() and writer.fetch_edges() == []
    with pytest.raises(InvalidInput):
        writer.delete_edges([EdgeKey("a", relation_type, "b")])


def test_longest_valid_relation_type(writer: FalkorGraphWriter) -> None:
    edge = _edge("a", "b", "A" + "b_1" * 20 + "xx")
    assert len(edge.relation_type) == 63
    writer.upsert_edges([edge])
    assert writer.fetch_edges() == [edge]


# -- unavailability ------------------------------------------------------------------------------


def test_unreachable_graph_is_unavailable() -> None:
    settings = make_settings(falkordb_url=f"redis://127.0.0.1:{_free_port()}")
    with pytest.raises(Unavailable):
        FalkorGraphWriter.from_settings(settings)


@pytest.fixture()
def private_falkordb(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A FalkorDB of this test alone, so that it can be stopped without harming the others."""
    with own_falkordb(tmp_path) as running:
        yield running


def test_graph_going_away_is_unavailable(
        private_falkordb: tuple[subprocess.Popen[bytes], int], dim: int) -> None:
    proc, port = private_falkordb
    settings = make_settings(falkordb_url=f"redis://127.0.0.1:{port}", graph_name="gone")
    writer = FalkorGraphWriter.from_settings(settings)
    writer.upsert_nodes([_node(0, dim)])
    assert writer.node_exists("node-0")
    proc.terminate()
    proc.wait(timeout=30)
    with pytest.raises(Unavailable):
        writer.upsert_nodes([_node(1, dim)])
    with pytest.raises(Unavailable):
        writer.upsert_edges([_edge("node-0", "node-1")])
    with pytest.raises(Unavailable):
        writer.delete_nodes(["node-0"])
    with pytest.raises(Unavailable):
        writer.fetch_edges()
