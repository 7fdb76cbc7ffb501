"""Personalized PageRank math of the PPR stage: pure functions over a small weighted graph.

- `transition`: the row-stochastic matrix of an undirected weighted graph (scipy.sparse CSR).
- `power_iteration`: PPR with a given damping (the walk's probability of going on), the
  teleport and every dangling node's mass going back to the seed distribution, stopped early
  once the top k of the candidate nodes has stayed the same for a few rounds (their order is
  all the ranking needs) or the vector has converged.
- `inflow_per_degree`: the mass a node's edges bring it, per unit of its weighted degree (what
  the PPR stage ranks rows by when `PprConfig.degree_normalised`; see the function).
- `forward_push`: the Andersen-Chung-Lang local estimate, used to choose which frontier nodes
  of the growing query-time subgraph are worth expanding: `p` never exceeds the exact PPR and
  the exact PPR never exceeds `p` plus the total residual.

Nodes are integers 0..n-1; the caller keeps the mapping to entities and rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

Vector = NDArray[np.float64]


def transition(n: int, edges: Iterable[tuple[int, int, float]]) -> sp.csr_matrix:
    """The row-stochastic transition matrix of the undirected graph `edges` (u, v, weight):
    row u holds w(u, v) / sum of u's weights. A repeated pair adds its weights; a node without
    edges has an all-zero row (dangling)."""
    table = np.asarray(list(edges), dtype=np.float64).reshape(-1, 3)
    return transition_arrays(n, table[:, 0].astype(np.int64), table[:, 1].astype(np.int64),
                             table[:, 2])


def transition_arrays(n: int, u: NDArray[np.int64], v: NDArray[np.int64], w: Vector
                      ) -> sp.csr_matrix:
    """`transition` of the edges given as three arrays (the PPR stage keeps its subgraph's
    edges so, to build the matrix without a Python loop per edge). Each entry is scaled by
    its row's degree before the one COO -> CSR conversion (which sums repeated pairs), rather
    than a diagonal matrix product after it."""
    keep = (w > 0) & (u != v)
    u, v, w = u[keep], v[keep], w[keep]
    rows, cols, data = np.concatenate([u, v]), np.concatenate([v, u]), np.concatenate([w, w])
    degree = weighted_degrees(n, u, v, w)
    inverse = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
    return sp.csr_matrix((data * inverse[rows], (rows, cols)), shape=(n, n))


def weighted_degrees(n: int, u: NDArray[np.int64], v: NDArray[np.int64], w: Vector
                     ) -> Vector:
    """Each node's weighted degree in the undirected graph (u, v, w): the sum of its edges'
    weights (self-loops and non-positive weights left out, as `transition_arrays` does)."""
    keep = (w > 0) & (u != v)
    ends = np.concatenate([u[keep], v[keep]])
    degree: Vector = np.bincount(ends, weights=np.concatenate([w[keep], w[keep]]),
                                 minlength=n).astype(np.float64)
    return degree


def inflow_per_degree(transposed: sp.csr_matrix, scores: Vector, degree: Vector, *,
                      damping: float) -> Vector:
    """The PPR mass each node receives over its edges, damping * (P^T x), divided by its
    weighted degree (0 for a node without edges).

    Why: on an undirected graph PPR is degree-biased (a walk's stationary mass grows with a
    node's degree), and PPR_s(v) / d(v) = PPR_v(s) / d(s): divided by its degree, a node's
    score reads as how much of a walk started *from it* ends on the seeds, so a passage that
    names the seeds' neighbourhood and little else outranks one that names it among fifty
    other things (the sweep order of Andersen, Chung and Lang's local clustering). Only the
    mass that came over edges is counted: a seed's own restart share is the caller's prior
    (the first stage's rank for a weak passage seed), which the fusion counts already."""
    flow: Vector = damping * (transposed @ scores)
    out: Vector = np.divide(flow, degree, out=np.zeros_like(flow), where=degree > 0)
    return out


def seed_vector(n: int, seeds: Mapping[int, float]) -> Vector:
    """The personalization vector: the seeds' weights, normalised to sum 1."""
    vector = np.zeros(n, dtype=np.float64)
    for node, weight in seeds.items():
        if weight > 0:
            vector[node] += weight
    total = vector.sum()
    if total <= 0:
        raise ValueError("no seed with a positive weight")
    normalised: Vector = vector / total
    return normalised


@dataclass(frozen=True)
class PprRun:
    """Scores (sum 1), the iterations run, and why the iteration stopped."""

    scores: Vector
    iterations: int
    stopped: str  # "top_k_stable" | "converged" | "max_iterations"


def power_iteration(matrix: sp.csr_matrix, seeds: Vector, *, damping: float = 0.5,
                    candidates: Sequence[int] | NDArray[np.int64] | None = None,
                    top_k: int = 20,
                    stable_rounds: int = 3, max_iterations: int = 50,
                    tolerance: float = 1e-6,
                    rank_key: Callable[[Vector], Vector] | None = None) -> PprRun:
    """x <- damping * (x P + dangling(x) * s) + (1 - damping) * s, from x = s.

    The same fixed point as networkx.pagerank(alpha=damping, personalization=s, dangling=s).
    Stops when the L1 change is below n * tolerance (networkx's test), or when the top
    `top_k` of `candidates` (by score, ties by node) has been the same for `stable_rounds`
    consecutive iterations (when `candidates` is given and `stable_rounds` > 0). With
    `rank_key`, the candidates are ordered by `rank_key(x)` (the ranking the caller will
    read) instead of by x.
    """
    if not 0 < damping < 1:
        raise ValueError("damping must be in (0, 1)")
    n = matrix.shape[0]
    dangling = np.asarray(matrix.sum(axis=1)).ravel() == 0
    transposed = matrix.T.tocsr()
    cand = np.asarray(candidates if candidates is not None else [], dtype=np.int64)
    x = seeds.copy()
    previous: tuple[int, ...] | None = None
    same = 0
    for iteration in range(1, max_iterations + 1):
        nxt = damping * (transposed @ x + x[dangling].sum() * seeds) + (1 - damping) * seeds
        change = float(np.abs(nxt - x).sum())
        x = nxt
        if change < n * tolerance:
            return PprRun(x, iteration, "converged")
        if len(cand) and stable_rounds > 0:
            current = top_nodes(x if rank_key is None else rank_key(x), cand, top_k)
            same = same + 1 if current == previous else 0
            previous = current
            if same >= stable_rounds:
                return PprRun(x, iteration, "top_k_stable")
    return PprRun(x, max_iterations, "max_iterations")


def top_nodes(scores: Vector, candidates: NDArray[np.int64], k: int) -> tuple[int, ...]:
    """The `k` best of `candidates` by score, ties by node number."""
    order = np.lexsort((candidates, -scores[candidates]))
    return tuple(int(c) for c in candidates[order[:k]])


@dataclass(frozen=True)
class PushEstimate:
    """Forward push's answer: the settled mass `p` (a lower bound of PPR) and the residual `r`
    still to be pushed (PPR <= p + sum(r) everywhere)."""

    p: Vector
    r: Vector
    pushes: int


def forward_push(matrix: sp.csr_matrix, seeds: Vector, *, damping: float = 0.5,
                 epsilon: float = 1e-4, max_pushes: int = 100_000) -> PushEstimate:
    """Andersen-Chung-Lang push for PPR with teleport 1 - damping, on the transition matrix
    `matrix` (row u: u's neighbours and w(u, v) / deg(u)).

    While some node holds a residual of at least `epsilon` times its out-degree (its number
    of neighbours here: the graph's weights are near 1), settle (1 - damping) of it and pass
    the rest to its neighbours in proportion to the weights. A dangling node settles its share
    and keeps nothing to pass on (the estimate stays a lower bound). Then p + sum r * PPR_u =
    PPR_s for the nodes that pushed, so p <= PPR and PPR - p <= sum(r).

    The invariant holds whatever the order of the pushes, so every node over the threshold
    pushes at once in a round (one sparse product per round instead of a Python loop per
    neighbour); `pushes` counts the nodes' pushes, and no round starts past `max_pushes`.
    """
    p = np.zeros(matrix.shape[0], dtype=np.float64)
    r = seeds.astype(np.float64).copy()
    threshold = epsilon * np.maximum(np.diff(matrix.indptr), 1)
    transposed = matrix.T.tocsr()
    pushes = 0
    while pushes < max_pushes:
        active = r >= threshold
        count = int(active.sum())
        if not count:
            break
        pushes += count
        mass = np.where(active, r, 0.0)
        r[active] = 0.0
        p += (1 - damping) * mass
        r += damping * (transposed @ mass)  # a dangling node's row is empty: its share drops
    return PushEstimate(p, r, pushes)
