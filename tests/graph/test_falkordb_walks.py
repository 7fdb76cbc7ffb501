"""FalkorGraphReader's neighbor walks (breadth-first, claims, order, limits) on the real FalkorDB
of the test stack, one fresh graph per test (fixtures in conftest.py)."""

from __future__ import annotations

import uuid

import pytest

from pipeline.domain.errors import InvalidInput
from pipeline.domain.read_model import Neighbor, Relation
from pipeline.graph.falkordb.reader import FalkorGraphReader
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from tests.graph.graphutil import (
    NS_A,
    NS_B,
    Ids,
    edge,
    named_nodes as _nodes,
)

pytestmark = pytest.mark.stack


# -- neighbors ----------------------------------------------------------------------------------


def _walk(ids: Ids, found: list[Neighbor]) -> list[tuple[str, int, str, str, str | None, str]]:
    """(node, depth, seed, relation type, direction, reached from) per neighbor, in order."""
    return [(ids.name(n.id), n.depth, ids.name(n.seed_id), n.relation.type,
             n.relation.direction,
             ids.name(n.relation.source_id) if n.relation.source_id else "")
            for n in found]


@pytest.fixture()
def chain(writer: FalkorGraphWriter, ids: Ids) -> Ids:
    """a -> b -> c -> d -> e -> f (LINKS), plus c -[OTHER]-> x."""
    _nodes(writer, ids, "a b c d e f x")
    writer.upsert_edges([edge(ids[p], ids[q]) for p, q in zip("abcde", "bcdef", strict=True)]
                        + [edge(ids["c"], ids["x"], "OTHER")])
    return ids


@pytest.mark.anyio
@pytest.mark.parametrize("hops", [1, 2, 3, 4])
async def test_chain_depths_out(chain: Ids, reader: FalkorGraphReader, hops: int) -> None:
    found = await reader.neighbors(NS_A, [chain["a"]], ["LINKS"], "out", hops, 50)
    expected = [("b", 1, "a", "LINKS", "out", "a"), ("c", 2, "a", "LINKS", "out", "b"),
                ("d", 3, "a", "LINKS", "out", "c"), ("e", 4, "a", "LINKS", "out", "d")]
    assert _walk(chain, found) == expected[:hops]
    assert all(n.relation.depth == n.depth for n in found)
    assert reader.last_walk_round_trips == hops


@pytest.mark.anyio
async def test_chain_directions_and_types(chain: Ids, reader: FalkorGraphReader) -> None:
    found = await reader.neighbors(NS_A, [chain["f"]], ["LINKS"], "in", 2, 50)
    assert _walk(chain, found) == [("e", 1, "f", "LINKS", "in", "f"),
                                   ("d", 2, "f", "LINKS", "in", "e")]
    assert await reader.neighbors(NS_A, [chain["f"]], ["LINKS"], "out", 4, 50) == []
    found = await reader.neighbors(NS_A, [chain["c"]], [], "both", 1, 50)
    assert _walk(chain, found) == [("b", 1, "c", "LINKS", "in", "c"),
                                   ("d", 1, "c", "LINKS", "out", "c"),
                                   ("x", 1, "c", "OTHER", "out", "c")]
    found = await reader.neighbors(NS_A, [chain["c"]], ["OTHER"], "both", 4, 50)
    assert _walk(chain, found) == [("x", 1, "c", "OTHER", "out", "c")]
    found = await reader.neighbors(NS_A, [chain["a"]], ["OTHER"], "out", 4, 50)
    assert found == []
    assert reader.last_walk_round_trips == 1  # an empty frontier ends the walk
    found = await reader.neighbors(NS_A, [chain["a"]], ["LINKS", "OTHER"], "out", 3, 50)
    assert [(chain.name(n.id), n.depth) for n in found] == [
        ("b", 1), ("c", 2), ("d", 3), ("x", 3)]
    assert await reader.neighbors(NS_A, [chain["a"]], ["UNKNOWN"], "both", 2, 50) == []


@pytest.mark.anyio
async def test_diamond(writer: FalkorGraphWriter, reader: FalkorGraphReader, ids: Ids) -> None:
    """a -> b, a -> c, b -> d, c -> d, d -> e: d once, at depth 2, reached from b."""
    _nodes(writer, ids, "a b c d e")
    writer.upsert_edges([edge(ids["c"], ids["d"]), edge(ids["b"], ids["d"]),
                         edge(ids["a"], ids["c"]), edge(ids["a"], ids["b"]),
                         edge(ids["d"], ids["e"])])
    found = await reader.neighbors(NS_A, [ids["a"]], [], "out", 4, 50)
    assert _walk(ids, found) == [("b", 1, "a", "LINKS", "out", "a"),
                                 ("c", 1, "a", "LINKS", "out", "a"),
                                 ("d", 2, "a", "LINKS", "out", "b"),
                                 ("e", 3, "a", "LINKS", "out", "d")]
    assert reader.last_walk_round_trips == 4  # the last round finds nothing new
    found = await reader.neighbors(NS_A, [ids["d"]], [], "in", 4, 50)
    assert _walk(ids, found) == [("b", 1, "d", "LINKS", "in", "d"),
                                 ("c", 1, "d", "LINKS", "in", "d"),
                                 ("a", 2, "d", "LINKS", "in", "b")]


@pytest.mark.anyio
async def test_walk_order_and_claims_follow_sources(writer: FalkorGraphWriter,
                                                    reader: FalkorGraphReader,
                                                    ids: Ids) -> None:
    """s -> a1 -> z2 -> t, s -> z1 -> a2 -> t: depth 2 lists z2 (child of the earlier a1)
    before a2, and t is claimed from z2, the earlier source, though a2 has the smaller id."""
    _nodes(writer, ids, "s a1 z1 z2 a2 t")
    writer.upsert_edges([edge(ids["s"], ids["a1"]), edge(ids["s"], ids["z1"]),
                         edge(ids["a1"], ids["z2"]), edge(ids["z1"], ids["a2"]),
                         edge(ids["a2"], ids["t"]), edge(ids["z2"], ids["t"])])
    found = await reader.neighbors(NS_A, [ids["s"]], [], "out", 4, 50)
    assert _walk(ids, found) == [("a1", 1, "s", "LINKS", "out", "s"),
                                 ("z1", 1, "s", "LINKS", "out", "s"),
                                 ("z2", 2, "s", "LINKS", "out", "a1"),
                                 ("a2", 2, "s", "LINKS", "out", "z1"),
                                 ("t", 3, "s", "LINKS", "out", "z2")]
    # A cut inside a depth keeps the walk order.
    found = await reader.neighbors(NS_A, [ids["s"]], [], "out", 4, 3)
    assert [ids.name(n.id) for n in found] == ["a1", "z1", "z2"]


@pytest.mark.anyio
async def test_parallel_edges_first_type_then_out(writer: FalkorGraphWriter,
                                                  reader: FalkorGraphReader, ids: Ids) -> None:
    _nodes(writer, ids, "a b")
    writer.upsert_edges([edge(ids["a"], ids["b"], "LINKS"), edge(ids["a"], ids["b"], "CITES"),
                         edge(ids["b"], ids["a"], "CITES"), edge(ids["b"], ids["a"], "ZETA")])
    found = await reader.neighbors(NS_A, [ids["a"]], [], "both", 1, 50)
    assert _walk(ids, found) == [("b", 1, "a", "CITES", "out", "a")]
    found = await reader.neighbors(NS_A, [ids["a"]], ["ZETA", "LINKS"], "both", 1, 50)
    assert _walk(ids, found) == [("b", 1, "a", "LINKS", "out", "a")]
    found = await reader.neighbors(NS_A, [ids["a"]], ["ZETA"], "both", 1, 50)
    assert _walk(ids, found) == [("b", 1, "a", "ZETA", "in", "a")]
    found = await reader.neighbors(NS_A, [ids["a"]], [], "in", 1, 50)
    assert _walk(ids, found) == [("b", 1, "a", "CITES", "in", "a")]


@pytest.mark.anyio
async def test_first_seed_claims(writer: FalkorGraphWriter, reader: FalkorGraphReader,
                                 ids: Ids) -> None:
    """s1 -> z <- s2, s1 -> p -> q, s2 -> q: seed order breaks ties at equal depth; a nearer
    seed beats an earlier one."""
    _nodes(writer, ids, "s1 s2 z p q")
    writer.upsert_edges([edge(ids["s1"], ids["z"]), edge(ids["s2"], ids["z"]),
                         edge(ids["s1"], ids["p"]), edge(ids["p"], ids["q"]),
                         edge(ids["s2"], ids["q"])])
    found = await reader.neighbors(NS_A, [ids["s1"], ids["s2"]], [], "out", 2, 50)
    assert _walk(ids, found) == [("p", 1, "s1", "LINKS", "out", "s1"),
                                 ("z", 1, "s1", "LINKS", "out", "s1"),
                                 ("q", 1, "s2", "LINKS", "out", "s2")]
    found = await reader.neighbors(NS_A, [ids["s2"], ids["s1"]], [], "out", 2, 50)
    assert _walk(ids, found) == [("q", 1, "s2", "LINKS", "out", "s2"),
                                 ("z", 1, "s2", "LINKS", "out", "s2"),
                                 ("p", 1, "s1", "LINKS", "out", "s1")]
    # Deeper nodes keep the seed of the node they were reached from.
    _nodes(writer, ids, "j k m n")
    writer.upsert_edges([edge(ids["s1"], ids["j"]), edge(ids["s1"], ids["k"]),
                         edge(ids["s2"], ids["m"]),
                         edge(ids["m"], ids["n"])])
    found = await reader.neighbors(NS_A, [ids["s1"], ids["s2"]], [], "out", 2, 50)
    assert [(ids.name(n.id), n.depth, ids.name(n.seed_id)) for n in found] == [
        ("j", 1, "s1"), ("k", 1, "s1"), ("p", 1, "s1"), ("z", 1, "s1"), ("m", 1, "s2"),
        ("q", 1, "s2"), ("n", 2, "s2")]
    # A seed reached from another seed is never a neighbor; duplicate seeds count once.
    writer.upsert_edges([edge(ids["s1"], ids["s2"])])
    found = await reader.neighbors(NS_A, [ids["s1"], ids["s2"], ids["s1"]], [], "out", 1, 50)
    assert "s2" not in [ids.name(n.id) for n in found]


@pytest.mark.anyio
async def test_limit_and_hops_validation(chain: Ids, reader: FalkorGraphReader) -> None:
    found = await reader.neighbors(NS_A, [chain["c"]], [], "both", 4, 2)
    assert [(chain.name(n.id), n.depth) for n in found] == [("b", 1), ("d", 1)]
    found = await reader.neighbors(NS_A, [chain["c"]], [], "both", 4, 3)
    assert [(chain.name(n.id), n.depth) for n in found] == [("b", 1), ("d", 1), ("x", 1)]
    assert reader.last_walk_round_trips == 1  # the limit was reached at depth 1
    found = await reader.neighbors(NS_A, [chain["c"]], [], "both", 4, 4)
    assert [(chain.name(n.id), n.depth) for n in found] == [
        ("b", 1), ("d", 1), ("x", 1), ("a", 2)]
    assert await reader.neighbors(NS_A, [chain["c"]], [], "both", 4, 0) == []
    assert await reader.neighbors(NS_A, [], [], "both", 4, 10) == []
    for hops in (0, 5, -1):
        with pytest.raises(InvalidInput) as info:
            await reader.neighbors(NS_A, [chain["a"]], [], "out", hops, 10)
        assert info.value.field == "max_hops"
    with pytest.raises(InvalidInput) as info:
        await reader.neighbors(NS_A, [chain["a"]], [], "sideways", 1, 10)  # type: ignore[arg-type]
    assert info.value.field == "direction"
    with pytest.raises(InvalidInput) as info:
        await reader.neighbors(NS_A, [chain["a"]], ["bad type"], "out", 1, 10)
    assert info.value.field == "relation_type"


@pytest.mark.anyio
async def test_cycles_terminate(writer: FalkorGraphWriter, reader: FalkorGraphReader,
                                ids: Ids) -> None:
    _nodes(writer, ids, "a b c")
    writer.upsert_edges([edge(ids["a"], ids["b"]), edge(ids["b"], ids["c"]),
                         edge(ids["c"], ids["a"]), edge(ids["a"], ids["a"], "SELF")])
    found = await reader.neighbors(NS_A, [ids["a"]], [], "both", 4, 50)
    assert _walk(ids, found) == [("b", 1, "a", "LINKS", "out", "a"),
                                 ("c", 1, "a", "LINKS", "in", "a")]
    assert reader.last_walk_round_trips == 2


@pytest.mark.anyio
async def test_walk_stays_in_namespace_and_skips_placeholders(
        writer: FalkorGraphWriter, reader: FalkorGraphReader, ids: Ids) -> None:
    _nodes(writer, ids, "a b q")
    _nodes(writer, ids, "foreign", NS_B)
    writer.upsert_edges([
        edge(ids["a"], ids["b"]),
        edge(ids["a"], ids["foreign"]),  # an endpoint in another namespace
        edge(ids["a"], ids["ghost"]),    # a placeholder: never projected itself
        edge(ids["ghost"], ids["q"]),    # reachable only through the placeholder
        edge(ids["foreign"], ids["q"]),
    ])
    found = await reader.neighbors(NS_A, [ids["a"]], [], "out", 4, 50)
    assert _walk(ids, found) == [("b", 1, "a", "LINKS", "out", "a")]
    assert await reader.neighbors(NS_B, [ids["a"]], [], "out", 4, 50) == []
    assert await reader.neighbors(NS_A, [ids["foreign"]], [], "out", 4, 50) == []


@pytest.mark.anyio
async def test_relation_metadata(writer: FalkorGraphWriter, reader: FalkorGraphReader,
                                 ids: Ids) -> None:
    evidence = uuid.uuid4()
    _nodes(writer, ids, "a b c")
    writer.upsert_edges([
        edge(ids["a"], ids["b"], "CITES", note="see page 3", status="active", role="source",
             confidence=0.5, evidence_id=str(evidence)),
        edge(ids["c"], ids["a"], "CITES", evidence_id="not-a-uuid"),
    ])
    found = await reader.neighbors(NS_A, [ids["a"]], ["CITES"], "both", 1, 50)
    assert [n.relation for n in found] == [
        Relation(type="CITES", direction="out", depth=1, source_id=ids["a"],
                 note="see page 3", status="active", role="source", confidence=0.5,
                 evidence_id=evidence),
        # Confidence 0 (unset) reads as None; an evidence id that is not a UUID too.
        Relation(type="CITES", direction="in", depth=1, source_id=ids["a"]),
    ]


