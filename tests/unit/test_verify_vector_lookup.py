"""verify's vector-index check: a node the approximate search misses at k=10 but finds on a wider
look is in the index (HNSW's greedy search with a short candidate list); one found at no k, or
one the index refuses to look up, is a miss."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from pipeline.ops.verify import VECTOR_LOOKUP_K, Drift, _check_vector_index


@dataclass
class _Result:
    result_set: list[list[Any]]


class _Graph:
    """Answers a node's own-vector look-up with the node only from k >= `reached_at[id]`."""

    def __init__(self, reached_at: dict[str, int | None], refuses: set[str]) -> None:
        self.reached_at, self.refuses = reached_at, refuses
        self.asked: list[tuple[str, int]] = []

    def ro_query(self, query: str, params: dict[str, str]) -> _Result:
        oid = params["id"]
        k = int(query.split("'embedding', ")[1].split(",")[0])
        self.asked.append((oid, k))
        if oid in self.refuses:
            raise ResponseError("Invalid arguments for procedure 'db.idx.vector.queryNodes'")
        at = self.reached_at[oid]
        others = [f"other-{i}" for i in range(k)]
        return _Result([[[oid, *others[:k - 1]] if at is not None and k >= at else others]])


def test_only_a_node_no_look_finds_is_a_miss() -> None:
    reached_at: dict[str, int | None] = {"near": 10, "deep": 50, "gone": None, "refused": 10}
    graph = _Graph(reached_at, refuses={"refused"})
    nodes = {oid: {"embedded_hash": "h"} for oid in reached_at}
    drift = Drift()
    _check_vector_index(graph=graph, pg_nodes=nodes, drift=drift, sample=10, seed=1,
                        settings=None)  # type: ignore[arg-type]
    assert sorted(drift.vector_misses) == ["gone", "refused"]
    assert drift.vector_sampled == 4
    # the wider look is asked only for a node the first did not find
    assert [k for oid, k in graph.asked if oid == "near"] == [VECTOR_LOOKUP_K[0]]
    assert [k for oid, k in graph.asked if oid == "deep"] == list(VECTOR_LOOKUP_K)
