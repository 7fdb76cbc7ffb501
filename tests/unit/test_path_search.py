"""The path search's pure logic (pipeline/retrieval/graph/paths.py) over an in-memory graph:
ranking, the enumeration cap, early stop, the probe past max_hops, request checks. The
real-stack proof is tests/entities/test_paths.py."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import pytest
from hypothesis import given, settings, strategies as st

from pipeline.domain.errors import InvalidInput, NotFound
from pipeline.domain.paths import (
    Citation,
    GraphEdge,
    Hub,
    NodeInfo,
    NodeRef,
    PathAnswer,
    PathQuery,
    edge_strength,
)
from pipeline.retrieval.graph.paths import PathConfig, PathFinder, enumerate_paths

NS = uuid.uuid4()


def _obj(i: int) -> NodeRef:
    return NodeRef("object", uuid.UUID(int=i + 1))


class FakeGraph:
    """An undirected graph of objects 0..n-1 with LINK edges; counts the edge fetches."""

    def __init__(self, edges: Sequence[tuple[int, int, float]]) -> None:
        self.stored = [GraphEdge(_obj(a), _obj(b), "LINK", "rel", 1.0, c) for a, b, c in edges]
        self.fetched: list[int] = []

    async def endpoints(self, namespace: uuid.UUID, ids: Sequence[uuid.UUID]
                        ) -> dict[uuid.UUID, NodeRef | str]:
        known = {e.a.id for e in self.stored} | {e.b.id for e in self.stored}
        return {i: NodeRef("object", i) for i in ids if i in known or i.int < 100}

    async def edges(self, namespace: uuid.UUID, frontier: Sequence[NodeRef], limit: int, *,
                    messages: bool = False) -> list[GraphEdge]:
        self.fetched.append(len(frontier))
        return [e for e in self.stored if e.a in frontier or e.b in frontier][:limit]

    async def hubs(self, namespace: uuid.UUID, entity_ids: Sequence[uuid.UUID], *,
                   fraction: float, min_parts: int) -> list[Hub]:
        return []

    async def nodes(self, namespace: uuid.UUID, refs: Sequence[NodeRef]
                    ) -> dict[NodeRef, NodeInfo]:
        return {r: NodeInfo(r) for r in refs}

    async def citations(self, namespace: uuid.UUID, edges: Sequence[GraphEdge], per_edge: int
                        ) -> dict[tuple[NodeRef, NodeRef, str, str], list[Citation]]:
        return {e.key: [Citation(note="n")] for e in edges}


def _find(graph: FakeGraph, source: int, target: int, config: PathConfig | None = None,
          **query: int) -> PathAnswer:
    finder = PathFinder(graph, config or PathConfig())
    return asyncio.run(finder.find(NS, PathQuery((_obj(source).id,), (_obj(target).id,),
                                                 **query)))


def _ids(answer: PathAnswer) -> list[list[int]]:
    return [[n.id.int - 1 for n in p.nodes] for p in answer.paths]


def test_fewest_hops_first_then_strongest() -> None:
    # 0-1-5 (weak), 0-2-5 (strong), 0-3-4-5 (strongest edges, one hop more)
    graph = FakeGraph([(0, 1, 0.2), (1, 5, 0.2), (0, 2, 0.9), (2, 5, 0.8), (0, 3, 1.0),
                       (3, 4, 1.0), (4, 5, 1.0)])
    answer = _find(graph, 0, 5, k=3)
    assert _ids(answer) == [[0, 2, 5], [0, 1, 5], [0, 3, 4, 5]]
    assert answer.status == "found" and not answer.search_incomplete
    assert answer.paths[0].strength == pytest.approx(0.72)
    assert all(s.evidence for p in answer.paths for s in p.steps)


def test_stops_once_k_paths_no_longer_than_the_covered_length_are_known() -> None:
    # a long tail behind the target's side would cost fetches the answer does not need
    graph = FakeGraph([(0, 1, 1.0), (1, 2, 1.0), *[(2 + i, 3 + i, 1.0) for i in range(10)]])
    answer = _find(graph, 0, 1, k=1)
    assert _ids(answer) == [[0, 1]] and len(graph.fetched) == 1


def test_beyond_max_hops_not_connected_and_no_path_within() -> None:
    chain = FakeGraph([(i, i + 1, 1.0) for i in range(6)])
    beyond = _find(chain, 0, 6, max_hops=4)
    assert (beyond.status, beyond.shortest_beyond, beyond.paths) == (
        "connected_beyond_max_length", 6, ())
    unknown = _find(chain, 0, 6, PathConfig(beyond_hops=1), max_hops=4)
    assert unknown.status == "no_path_within_max_length" and not unknown.search_incomplete
    apart = FakeGraph([(0, 1, 1.0), (1, 2, 1.0), (5, 6, 1.0)])
    assert _find(apart, 0, 6).status == "not_connected"


def test_enumeration_cap_is_reported() -> None:
    # a complete bipartite layer: many equally short paths
    edges = [(0, m, 1.0) for m in range(1, 9)] + [(m, 9, 1.0) for m in range(1, 9)]
    answer = _find(FakeGraph(edges), 0, 9, PathConfig(max_paths=3), k=5)
    assert answer.status == "found" and answer.search_incomplete
    assert answer.cut_by == ("path_cap",) and len(answer.paths) == 3


@pytest.mark.parametrize(("query", "field"), [
    ({"max_hops": 5}, "max_hops"), ({"max_hops": 0}, "max_hops"), ({"k": 21}, "k"),
])
def test_bad_bounds_name_their_field(query: dict[str, int], field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        _find(FakeGraph([(0, 1, 1.0)]), 0, 1, **query)
    assert err.value.field == field


def test_too_many_endpoints_name_their_side() -> None:
    finder = PathFinder(FakeGraph([(0, 1, 1.0)]), PathConfig(max_endpoints=2))
    many = tuple(_obj(i).id for i in range(3))
    with pytest.raises(InvalidInput) as err:
        asyncio.run(finder.find(NS, PathQuery((_obj(0).id,), many)))
    assert err.value.field == "to"


def test_unknown_endpoint_names_its_position() -> None:
    finder = PathFinder(FakeGraph([(0, 1, 1.0)]))
    query = PathQuery((_obj(0).id,), (_obj(1).id, uuid.UUID(int=10**6)))
    with pytest.raises(NotFound) as err:
        asyncio.run(finder.find(NS, query))
    assert err.value.field == "to[1]"


def test_edge_strength_rules() -> None:
    a, b = _obj(0), NodeRef("entity", uuid.uuid4())
    assert edge_strength(GraphEdge(_obj(1), _obj(2), "LINK")) == 1.0
    assert edge_strength(GraphEdge(a, b, "MENTIONS", weight=1)) == 0.5
    co = edge_strength(GraphEdge(b, b, "CO_OCCURS", weight=2))
    assert co < edge_strength(GraphEdge(b, b, "RELATES", weight=2)) < 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.sampled_from([0.3, 1.0])),
                max_size=20))
def test_enumerated_paths_are_simple_ranked_and_walk_real_edges(
        edges: list[tuple[int, int, float]]) -> None:
    graph = FakeGraph([(a, b, c) for a, b, c in edges if a != b])
    adjacency: dict[NodeRef, dict[NodeRef, GraphEdge]] = {}
    for e in graph.stored:
        adjacency.setdefault(e.a, {})[e.b] = e
        adjacency.setdefault(e.b, {})[e.a] = e
    paths, _ = enumerate_paths(adjacency, [_obj(0)], frozenset({_obj(7)}), 4, 50, 1000)
    keys = [(p.hops, -p.strength) for p in paths]
    assert keys == sorted(keys)
    for p in paths:
        assert len(set(p.nodes)) == len(p.nodes) and p.nodes[0] == _obj(0)
        assert p.nodes[-1] == _obj(7) and _obj(7) not in p.nodes[:-1]
        for here, there, step in zip(p.nodes[:-1], p.nodes[1:], p.steps, strict=True):
            assert {step.edge.a, step.edge.b} == {here, there}
            assert step.forward == (step.edge.a == here)
