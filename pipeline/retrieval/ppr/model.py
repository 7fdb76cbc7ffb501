"""The values the PPR stage's two walks share (`ppr_sqlwalk.py` reads its hops in SQL,
`ppr_arraywalk.py` walks the in-memory snapshot with numpy): the stage's bounds, a row as the
first stage hands it over, the walk's edge weights, and `Walked`, the subgraph a walk grew,
as arrays the ranking (`channels/ppr.py`) reads without a Python loop per node.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pipeline.domain.entity_reads import EntityRef

IntArray = npt.NDArray[np.int64]

# Edge weights of the walk: a mention and a stated relation count alike; a pair the resolver
# held as possibly the same entity (or put off by a curator: undecided still) passes half as much
# as one a person verified.
MENTION_WEIGHT = 1.0
LINK_WEIGHTS = {("RELATES", None): 1.0, ("POSSIBLY_SAME", "verified"): 1.0,
                ("POSSIBLY_SAME", "held"): 0.5, ("POSSIBLY_SAME", "deferred"): 0.5}


def id_halves(ids: Sequence[uuid.UUID]) -> npt.NDArray[np.uint64]:
    """Each id's 16 bytes as two unsigned 64-bit halves (big-endian: sorting by (hi, lo) is
    sorting by id, and by its string)."""
    raw = b"".join(i.bytes for i in ids)
    return np.frombuffer(raw, dtype=">u8").reshape(-1, 2).astype(np.uint64)


@dataclass(frozen=True)
class PprConfig:
    """The PPR stage's bounds and constants (the product's: `pipeline/wiring/services.py: PPR`)."""

    max_ngram: int = 8
    hub_fraction: float = 0.10
    hub_min_rows: int = 20
    max_hops: int = 3
    max_nodes: int = 2000
    max_edges: int = 8000
    frontier: int = 64
    rows_per_entity: int = 100
    damping: float = 0.5
    max_iterations: int = 50
    tolerance: float = 1e-6
    stable_k: int = 20
    stable_rounds: int = 3
    push_epsilon: float = 1e-4
    passage_seeds: int = 30
    passage_seed_weight: float = 0.0
    # rows ranked by the mass their edges bring them per unit of degree (ppr.inflow_per_degree)
    degree_normalised: bool = False


@dataclass(frozen=True)
class RowRef:
    """A row of the subgraph (or of the first stage's answer, as a weak seed): its object,
    and whether it is a part."""

    row_id: uuid.UUID
    object_id: uuid.UUID
    is_part: bool


@dataclass
class Walked:
    """A grown subgraph: `n` nodes numbered in the order they were met, the undirected edges
    `(u, v, w)` in the order they were added, the seed weights by node, and the row nodes
    (ascending) with an integer code for each row and for its object (equal codes, equal
    keys; `row_key` / `object_key` turn a code back into its id; `row_halves` /
    `object_halves` are the ids as `id_halves`, for sorting by id without the ids)."""

    n: int
    u: IntArray
    v: IntArray
    w: npt.NDArray[np.float64]
    seeds: dict[int, float]
    row_nodes: IntArray
    row_codes: IntArray
    object_codes: IntArray
    is_part: npt.NDArray[np.bool_]
    row_key: Callable[[int], uuid.UUID]
    object_key: Callable[[int], uuid.UUID]
    row_halves: npt.NDArray[np.uint64]
    object_halves: npt.NDArray[np.uint64]
    hops: int = 0
    truncated: bool = False
    hubs: dict[uuid.UUID, EntityRef] = field(default_factory=dict)
