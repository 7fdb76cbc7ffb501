"""The PPR walk one hop at a time through `EntityHops.hop` (one statement per hop on Postgres):
the fallback when no fresh snapshot answers (`PPR_WALK=sql`, a namespace's first searches,
a snapshot over its memory bound), and the reference the snapshot's array walk
(`ppr_arraywalk.py`) must equal node for node.

The subgraph grows mention by mention: an entity and its row get node numbers in the order
they are met (entity first), an edge joins them, the node and edge bounds refuse what comes
after them (`truncated`). Hubs met are recorded and left out.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from pipeline.domain.entity_reads import EntityRef, RowMention
from pipeline.ports import EntityHops
from pipeline.retrieval.ppr.model import (
    LINK_WEIGHTS,
    MENTION_WEIGHT,
    PprConfig,
    RowRef,
    Walked,
    id_halves,
)
from pipeline.retrieval.ppr.pagerank import forward_push, seed_vector, transition_arrays


class _Subgraph:
    """The growing subgraph: node numbers for entities and rows, weighted undirected edges,
    each row's object, and the caps."""

    def __init__(self, max_nodes: int, max_edges: int) -> None:
        self.max_nodes = max_nodes
        self.max_edges = max_edges
        self.index: dict[tuple[str, uuid.UUID], int] = {}
        self.keys: list[tuple[str, uuid.UUID]] = []
        self.edges: set[tuple[int, int]] = set()
        self.rows: dict[int, RowRef] = {}
        self.truncated = False
        # the edges as columns, in insertion order, for `matrix`
        self.ends: tuple[list[int], list[int], list[float]] = ([], [], [])

    def node(self, kind: str, key: uuid.UUID) -> tuple[int | None, bool]:
        """The node's number and whether it is new; None when the node cap refuses it."""
        found = self.index.get((kind, key))
        if found is not None:
            return found, False
        if len(self.keys) >= self.max_nodes:
            self.truncated = True
            return None, False
        self.index[(kind, key)] = len(self.keys)
        self.keys.append((kind, key))
        return len(self.keys) - 1, True

    def edge(self, a: int, b: int, weight: float) -> None:
        pair = (min(a, b), max(a, b))
        if pair in self.edges or a == b:
            return
        if len(self.edges) >= self.max_edges:
            self.truncated = True
            return
        self.edges.add(pair)
        self.ends[0].append(pair[0])
        self.ends[1].append(pair[1])
        self.ends[2].append(weight)

    def matrix(self) -> sp.csr_matrix:
        """The transition matrix of the subgraph as it stands."""
        u, v, w = self.ends
        return transition_arrays(len(self.keys), np.asarray(u, dtype=np.int64),
                                 np.asarray(v, dtype=np.int64), np.asarray(w, dtype=np.float64))

    def walked(self, seeds: dict[int, float], hops: int, hubs: dict[uuid.UUID, EntityRef]
               ) -> Walked:
        """The subgraph as `Walked` arrays (row codes index the row list, object codes the
        objects in the order first met)."""
        numbers = sorted(self.rows)
        refs = [self.rows[i] for i in numbers]
        objects: dict[uuid.UUID, int] = {}
        codes = [objects.setdefault(r.object_id, len(objects)) for r in refs]
        object_ids = list(objects)
        u, v, w = self.ends
        return Walked(
            n=len(self.keys), u=np.asarray(u, dtype=np.int64), v=np.asarray(v, dtype=np.int64),
            w=np.asarray(w, dtype=np.float64), seeds=seeds,
            row_nodes=np.asarray(numbers, dtype=np.int64),
            row_codes=np.arange(len(refs), dtype=np.int64),
            object_codes=np.asarray(codes, dtype=np.int64),
            is_part=np.asarray([r.is_part for r in refs], dtype=bool),
            row_key=lambda c: refs[c].row_id, object_key=object_ids.__getitem__,
            row_halves=id_halves([r.row_id for r in refs]),
            object_halves=id_halves([r.object_id for r in refs]),
            hops=hops, truncated=self.truncated, hubs=hubs)


async def sql_walk(reader: EntityHops, namespace: uuid.UUID, cfg: PprConfig,
                   seed_entities: Sequence[tuple[uuid.UUID, float]],
                   weak: Sequence[tuple[RowRef, float]], hub_limit: float,
                   hubs: dict[uuid.UUID, EntityRef]) -> Walked:
    """Grow the subgraph from the seeds (entities, then the first stage's rows) hop by hop,
    reading each hop from `reader`."""
    graph = _Subgraph(cfg.max_nodes, cfg.max_edges)
    seeds: dict[int, float] = {}
    for entity_id, weight in seed_entities:
        number, _ = graph.node("e", entity_id)
        if number is not None:
            seeds[number] = weight
    for row, weight in weak:
        number, _ = graph.node("r", row.row_id)
        if number is not None:
            graph.rows[number] = row
            seeds[number] = seeds.get(number, 0.0) + weight
    if not seeds:
        return graph.walked(seeds, 0, hubs)
    frontier = set(seeds)
    hops = 0
    for hop in range(cfg.max_hops):
        chosen = set(frontier) if hop == 0 else _choose(cfg, graph, seeds, frontier)
        if not chosen:
            break
        hops += 1
        frontier -= chosen
        entity_ids = sorted(graph.keys[i][1] for i in chosen if graph.keys[i][0] == "e")
        row_ids = sorted(graph.keys[i][1] for i in chosen if graph.keys[i][0] == "r")
        room = max(0, cfg.max_edges - len(graph.edges))
        per_entity = share_per_entity(cfg, len(graph.keys), len(entity_ids))
        found = await reader.hop(namespace, entity_ids, row_ids, per_entity, room + 1)
        counts: dict[uuid.UUID, int] = {}
        for m in found.rows_of:
            counts[m.entity_id] = counts.get(m.entity_id, 0) + 1
        if any(c >= per_entity for c in counts.values()) or len(found.links) > room:
            graph.truncated = True
        for m in [*found.rows_of, *found.entities_of]:
            if m.entity_part_count > hub_limit:
                hubs.setdefault(m.entity_id, EntityRef(m.entity_id, "", m.entity_part_count))
                continue
            _mention(graph, m, frontier)
        for link in found.links:
            _link(graph, link.from_id, link.from_part_count, link.to_id, link.to_part_count,
                  LINK_WEIGHTS.get((link.edge_type, link.status), 0.0), hub_limit, hubs,
                  frontier)
    return graph.walked(seeds, hops, hubs)


def share_per_entity(cfg: PprConfig, nodes: int, entities: int) -> int:
    """Rows read per expanded entity this hop: rows past the node bound would be read only to
    be refused, so the hop's entities share the nodes left (at least one row each, for the
    edges to rows already in)."""
    nodes_left = max(0, cfg.max_nodes - nodes)
    return min(cfg.rows_per_entity, max(1, -(-nodes_left // max(1, entities))))


def _mention(graph: _Subgraph, m: RowMention, frontier: set[int]) -> None:
    entity, new_entity = graph.node("e", m.entity_id)
    row, new_row = graph.node("r", m.row_id)
    if row is not None:
        graph.rows.setdefault(row, RowRef(m.row_id, m.object_id, m.is_part))
    for number, new in ((entity, new_entity), (row, new_row)):
        if number is not None and new:
            frontier.add(number)
    if entity is not None and row is not None:
        graph.edge(entity, row, MENTION_WEIGHT)


def _link(graph: _Subgraph, a: uuid.UUID, a_count: int, b: uuid.UUID, b_count: int,
          weight: float, hub_limit: float, hubs: dict[uuid.UUID, EntityRef],
          frontier: set[int]) -> None:
    if weight <= 0:
        return
    ends = []
    for key, count in ((a, a_count), (b, b_count)):
        if count > hub_limit:
            hubs.setdefault(key, EntityRef(key, "", count))
            return
        number, new = graph.node("e", key)
        if number is None:
            return
        if new:
            frontier.add(number)
        ends.append(number)
    graph.edge(ends[0], ends[1], weight)


def _choose(cfg: PprConfig, graph: _Subgraph, seeds: dict[int, float], frontier: set[int]
            ) -> set[int]:
    """The `frontier` unexpanded nodes with the highest forward-push estimate."""
    if len(frontier) <= cfg.frontier:
        return set(frontier)
    push = forward_push(graph.matrix(), seed_vector(len(graph.keys), seeds),
                        damping=cfg.damping, epsilon=cfg.push_epsilon)
    estimate = push.p + push.r
    ranked = sorted(frontier, key=lambda i: (-float(estimate[i]), i))
    return set(ranked[: cfg.frontier])
