"""The PPR stage's math: power iteration against networkx's personalized PageRank, forward
push's bounds, the early stop on a stable top k, the degree-normalised inflow (symmetric in
seed and node), and seed selection (longest match wins)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pipeline.retrieval.ppr.pagerank import (
    forward_push,
    inflow_per_degree,
    power_iteration,
    seed_vector,
    top_nodes,
    transition,
    weighted_degrees,
)
from pipeline.retrieval.ppr.seeds import common_word_match, longest_matches, query_ngrams


def _graph(n: int, edges: list[tuple[int, int, float]]) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(range(n))
    for u, v, w in edges:
        if u != v:
            g.add_edge(u, v, weight=g.get_edge_data(u, v, {"weight": 0.0})["weight"] + w)
    return g


graphs = st.integers(min_value=2, max_value=12).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1),
                       st.floats(min_value=0.1, max_value=3.0)), min_size=1, max_size=30),
    st.dictionaries(st.integers(0, n - 1), st.floats(min_value=0.1, max_value=1.0),
                    min_size=1, max_size=3)))


@settings(max_examples=60, deadline=None)
@given(graphs)
def test_power_iteration_is_networkx_personalized_pagerank(case: tuple[
        int, list[tuple[int, int, float]], dict[int, float]]) -> None:
    n, edges, seeds = case
    s = seed_vector(n, seeds)
    run = power_iteration(transition(n, edges), s, damping=0.5, max_iterations=500,
                          tolerance=1e-12, stable_rounds=0)
    personal = {i: float(s[i]) for i in range(n)}
    expected = nx.pagerank(_graph(n, edges), alpha=0.5, personalization=personal,
                           dangling=personal, weight="weight", tol=1e-12, max_iter=500)
    assert run.stopped == "converged"
    assert np.allclose(run.scores, [expected[i] for i in range(n)], atol=1e-8)
    assert run.scores.sum() == pytest.approx(1.0)


def test_dangling_mass_returns_to_the_seeds() -> None:
    # 0 - 1, and 2 has no edges: a seed on 2 keeps all its mass there.
    s = seed_vector(3, {2: 1.0})
    run = power_iteration(transition(3, [(0, 1, 1.0)]), s, max_iterations=200,
                          tolerance=1e-12, stable_rounds=0)
    assert run.scores == pytest.approx([0.0, 0.0, 1.0])


@settings(max_examples=60, deadline=None)
@given(graphs, st.sampled_from([1e-2, 1e-3, 1e-4]))
def test_forward_push_bounds(case: tuple[int, list[tuple[int, int, float]], dict[int, float]],
                             epsilon: float) -> None:
    n, edges, seeds = case
    # every node gets an edge, so none is dangling (the bounds' premise)
    edges = edges + [(i, (i + 1) % n, 0.5) for i in range(n)]
    matrix = transition(n, edges)
    s = seed_vector(n, seeds)
    exact = power_iteration(matrix, s, max_iterations=1000, tolerance=1e-14,
                            stable_rounds=0).scores
    push = forward_push(matrix, s, damping=0.5, epsilon=epsilon)
    assert np.all(push.p <= exact + 1e-9)
    assert np.all(exact <= push.p + push.r.sum() + 1e-9)
    # finished: no node holds a residual of epsilon times its degree
    degree = np.maximum(np.diff(matrix.indptr), 1)
    assert np.all(push.r < epsilon * degree + 1e-15)
    assert push.p.sum() + push.r.sum() == pytest.approx(1.0)


def test_forward_push_ranks_the_near_nodes_first() -> None:
    # a path 0-1-2-3-4 seeded at 0: the estimate falls with the distance
    matrix = transition(5, [(i, i + 1, 1.0) for i in range(4)])
    push = forward_push(matrix, seed_vector(5, {0: 1.0}), epsilon=1e-3)
    estimate = push.p + push.r
    assert list(np.argsort(-estimate)) == [0, 1, 2, 3, 4]


def test_top_k_stop_comes_before_convergence_and_keeps_the_top_k() -> None:
    # a star around 0 with unequal spokes, seeded at the hub: the order settles long before
    # the vector does at this tolerance
    edges = [(0, i, float(i)) for i in range(1, 9)]
    matrix = transition(9, edges)
    s = seed_vector(9, {0: 1.0})
    candidates = list(range(1, 9))
    early = power_iteration(matrix, s, candidates=candidates, top_k=3, stable_rounds=2,
                            max_iterations=500, tolerance=1e-15)
    full = power_iteration(matrix, s, max_iterations=500, tolerance=1e-15, stable_rounds=0)
    assert early.stopped == "top_k_stable"
    assert early.iterations < full.iterations
    cand = np.asarray(candidates, dtype=np.int64)
    assert top_nodes(early.scores, cand, 3) == top_nodes(full.scores, cand, 3) == (8, 7, 6)


def _degrees(n: int, edges: list[tuple[int, int, float]]) -> np.ndarray:
    table = np.asarray(edges, dtype=np.float64).reshape(-1, 3)
    return weighted_degrees(n, table[:, 0].astype(np.int64), table[:, 1].astype(np.int64),
                            table[:, 2])


@settings(max_examples=60, deadline=None)
@given(graphs, st.data())
def test_inflow_per_degree_is_symmetric_in_seed_and_node(
        case: tuple[int, list[tuple[int, int, float]], dict[int, float]],
        data: st.DataObject) -> None:
    # PPR_a(b) / d(b) = PPR_b(a) / d(a) on an undirected graph: ranked so, a node is scored by
    # how much of a walk started from it ends on the seed
    n, edges, _ = case
    edges = edges + [(i, (i + 1) % n, 0.5) for i in range(n)]  # connected, nothing dangling
    a = data.draw(st.integers(0, n - 1))
    b = data.draw(st.integers(0, n - 1).filter(lambda x: x != a))
    matrix = transition(n, edges)
    transposed = matrix.T.tocsr()
    degree = _degrees(n, edges)

    def from_seed(node: int) -> np.ndarray:
        run = power_iteration(matrix, seed_vector(n, {node: 1.0}), damping=0.5,
                              max_iterations=2000, tolerance=1e-15, stable_rounds=0)
        return inflow_per_degree(transposed, run.scores, degree, damping=0.5)

    assert from_seed(a)[b] == pytest.approx(from_seed(b)[a], rel=1e-6, abs=1e-12)


def test_inflow_per_degree_leaves_out_the_restart_share_and_edgeless_nodes() -> None:
    # 0 - 1 - 2, and 3 alone; seeded at 0 and 3
    edges = [(0, 1, 1.0), (1, 2, 1.0)]
    matrix = transition(4, edges)
    s = seed_vector(4, {0: 0.5, 3: 0.5})
    run = power_iteration(matrix, s, max_iterations=2000, tolerance=1e-15, stable_rounds=0)
    degree = _degrees(4, edges)
    assert list(degree) == [1.0, 2.0, 1.0, 0.0]
    got = inflow_per_degree(matrix.T.tocsr(), run.scores, degree, damping=0.5)
    # all but what the seeds hand back: the restart share, and its share of 3's dangling mass
    assert got[0] == pytest.approx(run.scores[0] - (0.5 + 0.5 * run.scores[3]) * 0.5)
    assert got[1] == pytest.approx(run.scores[1] / 2)
    assert got[2] == pytest.approx(run.scores[2])
    assert got[3] == 0.0  # a seed without edges: nothing came over an edge


def test_top_k_stop_orders_by_the_rank_key() -> None:
    # a star around 0 with unequal spokes: by score the heavy spokes lead; by score per unit
    # of degree every spoke ties, so node number decides
    edges = [(0, i, float(i)) for i in range(1, 9)]
    matrix = transition(9, edges)
    s = seed_vector(9, {0: 1.0})
    degree = _degrees(9, edges)
    transposed = matrix.T.tocsr()

    def key(x: np.ndarray) -> np.ndarray:
        return inflow_per_degree(transposed, x, degree, damping=0.5)

    cand = np.arange(1, 9, dtype=np.int64)
    early = power_iteration(matrix, s, candidates=cand, top_k=3, stable_rounds=2,
                            max_iterations=500, tolerance=1e-15, rank_key=key)
    assert early.stopped == "top_k_stable"
    assert top_nodes(key(early.scores), cand, 3) == (1, 2, 3)
    assert top_nodes(early.scores, cand, 3) == (8, 7, 6)


def test_seed_vector_refuses_no_seed() -> None:
    with pytest.raises(ValueError):
        seed_vector(3, {0: 0.0})


def test_query_ngrams_up_to_the_longest() -> None:
    grams = query_ngrams("Who founded New York Times?", max_tokens=3)
    spans = {(g.start, g.end): g.text for g in grams}
    assert spans[(2, 5)] == "New York Times"
    assert spans[(0, 1)] == "Who"
    assert all(g.end - g.start <= 3 for g in grams)


def test_longest_match_wins_and_spans_do_not_overlap() -> None:
    grams = query_ngrams("the New York Times building in New York", max_tokens=4)
    matched = {"new york", "new york times", "times", "building"}
    chosen = longest_matches([g for g in grams if g.text.lower() in matched])
    assert [g.text for g in chosen] == ["New York Times", "building", "New York"]


def test_a_lower_case_common_word_is_no_seed() -> None:
    assert common_word_match("nation", "nation", "Nation")
    assert common_word_match("the birthplace", "birthplace", "Birthplace")
    assert not common_word_match("Nation", "nation", "Nation")
    assert not common_word_match("moonfall harbor", "moonfall harbor", "Moonfall Harbor")
    assert not common_word_match("python3", "python3", "Python3")
    assert not common_word_match("numpy", "numpy", "numpy")
