"""The PPR walk on a namespace's in-memory snapshot, with numpy: the subgraph grows a hop at
a time over the snapshot's integer ids (its CSR incidence arrays), never a Python object per
mention, and equals the SQL walk's (`ppr_sqlwalk.py`) node for node.

What makes the two equal: a hop's mentions come in the SQL's order (the expanded entities by
id, each with its first live rows by id; then the expanded rows by id, each with its live
entities by id), and the sequential rules of the SQL walk have batch forms with the same
outcome:
- nodes: each mention meets its entity, then its row; a node not yet in gets the next number,
  until the node bound, which refuses the rest (`truncated`). So the new nodes of a hop are its
  distinct new keys in order of first appearance, the first `max_nodes - n` of them kept;
- edges: (entity, row) for each mention whose two ends are in; a pair already in is skipped;
  the new distinct pairs in order, the first `max_edges - m` kept (`truncated` past them);
- hubs (an entity named by more rows than the hub limit) are recorded in order of appearance
  and their mentions dropped before either rule;
- walkable entity edges (few: RELATES and POSSIBLY_SAME) are applied after the mentions, one
  at a time, with the same rules;
- the frontier is every node not yet expanded; past the first hop the `frontier` best by the
  forward-push estimate (ties by node number) are expanded.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from pipeline.domain.entity_reads import EntityRef
from pipeline.retrieval.ppr.model import (
    LINK_WEIGHTS,
    MENTION_WEIGHT,
    IntArray,
    PprConfig,
    RowRef,
    Walked,
    id_halves,
)
from pipeline.retrieval.ppr.pagerank import forward_push, seed_vector, transition_arrays
from pipeline.retrieval.ppr.snapshot import EntitySnapshot
from pipeline.retrieval.ppr.sqlwalk import share_per_entity

# Kinds of node: an entity or row of the snapshot, or an id the snapshot does not know (a seed
# entity or first-stage row newer than it: a node, as in the SQL walk, that expands to nothing).
ENTITY, ROW, OTHER_ENTITY, OTHER_ROW = 0, 1, 2, 3


class _Grown:
    """The subgraph being grown: node numbers of snapshot keys (arrays indexed by the
    snapshot's entity and row numbers), each node's kind and snapshot number, the edges as
    column chunks, and the bounds."""

    def __init__(self, snap: EntitySnapshot, cfg: PprConfig) -> None:
        self.snap = snap
        self.cfg = cfg
        self.ne, self.nr = len(snap.e_keys), len(snap.r_keys)
        self.entity_node = np.full(self.ne, -1, dtype=np.int64)
        self.row_node = np.full(self.nr, -1, dtype=np.int64)
        size = max(cfg.max_nodes, 0)
        self.kind = np.zeros(size, dtype=np.int8)
        self.index = np.zeros(size, dtype=np.int64)  # snapshot number, or into `others`
        self.expanded = np.zeros(size, dtype=bool)
        self.n = 0
        self.others: list[tuple[int, uuid.UUID, RowRef | None]] = []
        self.other_node: dict[tuple[int, uuid.UUID], int] = {}
        self.ends: list[tuple[IntArray, IntArray, npt.NDArray[np.float64]]] = []
        self.edge_codes = np.empty(0, dtype=np.int64)
        self.m = 0
        self.truncated = False

    # -- nodes -----------------------------------------------------------------------------

    def add(self, codes: IntArray) -> None:
        """Number the keys `codes` (entity e: e; row r: ne + r) not yet in, in order of first
        appearance, up to the node bound."""
        is_entity = codes < self.ne
        # each side looked up on its own codes (np.where would index both arrays with every
        # code: out of bounds when a snapshot has entities but no rows, or rows but no entities)
        numbers = np.empty(len(codes), dtype=np.int64)
        numbers[is_entity] = self.entity_node[codes[is_entity]]
        numbers[~is_entity] = self.row_node[codes[~is_entity] - self.ne]
        new = codes[numbers < 0]
        if not len(new):
            return
        keys, first = np.unique(new, return_index=True)
        ordered = keys[np.argsort(first)]
        left = max(0, self.cfg.max_nodes - self.n)
        if len(ordered) > left:
            self.truncated = True
            ordered = ordered[:left]
        numbers = np.arange(self.n, self.n + len(ordered), dtype=np.int64)
        entity = ordered < self.ne
        self.entity_node[ordered[entity]] = numbers[entity]
        self.row_node[ordered[~entity] - self.ne] = numbers[~entity]
        self.kind[numbers] = np.where(entity, ENTITY, ROW)
        self.index[numbers] = np.where(entity, ordered, ordered - self.ne)
        self.n += len(ordered)

    def entity(self, e: int) -> int | None:
        """The snapshot entity's node (numbered now if new); None when the bound refuses it."""
        self.add(np.asarray([e], dtype=np.int64))
        number = int(self.entity_node[e])
        return number if number >= 0 else None

    def row(self, r: int) -> int | None:
        """The snapshot row's node (numbered now if new); None when the bound refuses it."""
        self.add(np.asarray([self.ne + r], dtype=np.int64))
        number = int(self.row_node[r])
        return number if number >= 0 else None

    def other(self, kind: int, key: uuid.UUID, ref: RowRef | None) -> int | None:
        """A node for an id the snapshot does not know."""
        found = self.other_node.get((kind, key))
        if found is not None:
            return found
        if self.n >= self.cfg.max_nodes:
            self.truncated = True
            return None
        number = self.n
        self.other_node[(kind, key)] = number
        self.kind[number], self.index[number] = kind, len(self.others)
        self.others.append((kind, key, ref))
        self.n += 1
        return number

    # -- edges -----------------------------------------------------------------------------

    def connect(self, a: IntArray, b: IntArray, weight: float) -> None:
        """Add the edges (a[i], b[i]) not yet in, in order, up to the edge bound."""
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        keep = lo != hi
        lo, hi = lo[keep], hi[keep]
        if not len(lo):
            return
        codes = lo * max(self.cfg.max_nodes, 1) + hi
        _, first = np.unique(codes, return_index=True)
        at = np.sort(first)
        at = at[~np.isin(codes[at], self.edge_codes)]
        room = max(0, self.cfg.max_edges - self.m)
        if len(at) > room:
            self.truncated = True
            at = at[:room]
        if not len(at):
            return
        self.ends.append((lo[at], hi[at], np.full(len(at), weight, dtype=np.float64)))
        self.edge_codes = np.concatenate([self.edge_codes, codes[at]])
        self.m += len(at)

    def columns(self) -> tuple[IntArray, IntArray, npt.NDArray[np.float64]]:
        """The edges as three columns, in the order added."""
        if not self.ends:
            return (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64),
                    np.empty(0, dtype=np.float64))
        u, v, w = (np.concatenate(c) for c in zip(*self.ends, strict=True))
        return u, v, w


def array_walk(snap: EntitySnapshot, cfg: PprConfig,
               seed_entities: Sequence[tuple[uuid.UUID, float]],
               weak: Sequence[tuple[RowRef, float]], hub_limit: float,
               hubs: dict[uuid.UUID, EntityRef]) -> Walked:
    """Grow the subgraph from the seeds (entities, then the first stage's rows) on the
    snapshot; hubs met are recorded in `hubs`. Synchronous: no refresh interleaves."""
    g = _Grown(snap, cfg)
    seeds = _seed(g, seed_entities, weak)
    hops = 0
    for hop in range(cfg.max_hops if seeds else 0):
        frontier = np.flatnonzero(~g.expanded[: g.n])
        chosen = frontier if hop == 0 else _choose(cfg, g, seeds, frontier)
        if not len(chosen):
            break
        hops += 1
        g.expanded[chosen] = True
        _expand(g, chosen, hub_limit, hubs)
    return _walked(g, seeds, hops, hubs)


def _seed(g: _Grown, seed_entities: Sequence[tuple[uuid.UUID, float]],
          weak: Sequence[tuple[RowRef, float]]) -> dict[int, float]:
    """Number the seeds, entities first, then the first stage's rows (a row met twice adds
    its weights); the seed weights by node."""
    snap = g.snap
    entities = [snap.e_index.get(entity_id) for entity_id, _ in seed_entities]
    rows = [snap.r_index.get(ref.row_id) for ref, _ in weak]
    seeds: dict[int, float] = {}
    if all(e is not None and e < g.ne for e in entities) and all(
            r is not None and r < g.nr for r in rows):
        # all known to the snapshot (the usual case): numbered at once, in the same order
        g.add(np.asarray([*entities, *(g.ne + r for r in rows if r is not None)],
                         dtype=np.int64))
        numbers: list[int | None] = [
            *(int(g.entity_node[e]) for e in entities if e is not None),
            *(int(g.row_node[r]) for r in rows if r is not None)]
        numbers = [n if n is not None and n >= 0 else None for n in numbers]
    else:
        numbers = [g.entity(e) if e is not None and e < g.ne else
                   g.other(OTHER_ENTITY, entity_id, None)
                   for e, (entity_id, _) in zip(entities, seed_entities, strict=True)]
        numbers += [g.row(r) if r is not None and r < g.nr else
                    g.other(OTHER_ROW, ref.row_id, ref)
                    for r, (ref, _) in zip(rows, weak, strict=True)]
    for number, (_, weight) in zip(numbers[: len(entities)], seed_entities, strict=True):
        if number is not None:
            seeds[number] = weight
    for number, (_, weight) in zip(numbers[len(entities):], weak, strict=True):
        if number is not None:
            seeds[number] = seeds.get(number, 0.0) + weight
    return seeds


def _expand(g: _Grown, chosen: IntArray, hub_limit: float, hubs: dict[uuid.UUID, EntityRef]
            ) -> None:
    """One hop from the `chosen` nodes."""
    snap, cfg = g.snap, g.cfg
    kinds, index = g.kind[chosen], g.index[chosen]
    entities = sorted(index[kinds == ENTITY].tolist(), key=snap.e_keys.__getitem__)
    rows = sorted(index[kinds == ROW].tolist(), key=snap.r_keys.__getitem__)
    asked = int(np.isin(kinds, (ENTITY, OTHER_ENTITY)).sum())
    per_entity = share_per_entity(cfg, g.n, asked)
    room = max(0, cfg.max_edges - g.m)
    of_entity: list[IntArray] = []
    of_row: list[IntArray] = []
    for e in entities:
        if snap.e_live[e]:
            found = snap.live_rows_of(e, per_entity)
            g.truncated |= len(found) >= per_entity
            of_entity.append(np.full(len(found), e, dtype=np.int64))
            of_row.append(found)
    for r in rows:
        if snap.r_live[r]:
            found = snap.live_entities_of(r)
            of_entity.append(found)
            of_row.append(np.full(len(found), r, dtype=np.int64))
    links = snap.links_touching(entities, room + 1)
    g.truncated |= len(links) > room
    if of_entity:
        ents, rws = np.concatenate(of_entity), np.concatenate(of_row)
        hub = snap.e_count[ents] > hub_limit
        if hub.any():
            met, first = np.unique(ents[hub], return_index=True)
            for e in met[np.argsort(first)].tolist():
                _hub(snap, e, hubs)
            ents, rws = ents[~hub], rws[~hub]
        codes = np.empty(2 * len(ents), dtype=np.int64)
        codes[0::2], codes[1::2] = ents, g.ne + rws
        g.add(codes)
        a, b = g.entity_node[ents], g.row_node[rws]
        both = (a >= 0) & (b >= 0)
        g.connect(a[both], b[both], MENTION_WEIGHT)
    for a_e, b_e, edge_type, status, _ in links:
        weight = LINK_WEIGHTS.get((edge_type, status), 0.0)
        if weight <= 0:
            continue
        ends: list[int] = []
        for e in (a_e, b_e):
            if snap.e_count[e] > hub_limit:
                _hub(snap, e, hubs)
                break
            number = g.entity(e)
            if number is None:
                break
            ends.append(number)
        if len(ends) == 2:
            g.connect(np.asarray(ends[:1]), np.asarray(ends[1:]), weight)


def _hub(snap: EntitySnapshot, e: int, hubs: dict[uuid.UUID, EntityRef]) -> None:
    key = snap.e_keys[e]
    hubs.setdefault(key, EntityRef(key, "", int(snap.e_count[e])))


def _choose(cfg: PprConfig, g: _Grown, seeds: dict[int, float], frontier: IntArray
            ) -> IntArray:
    """The `frontier` unexpanded nodes with the highest forward-push estimate (ties: the
    lower node number)."""
    if len(frontier) <= cfg.frontier:
        return frontier
    u, v, w = g.columns()
    push = forward_push(transition_arrays(g.n, u, v, w), seed_vector(g.n, seeds),
                        damping=cfg.damping, epsilon=cfg.push_epsilon)
    estimate = push.p + push.r
    order = np.lexsort((frontier, -estimate[frontier]))
    return frontier[order[: cfg.frontier]]


def _walked(g: _Grown, seeds: dict[int, float], hops: int, hubs: dict[uuid.UUID, EntityRef]
            ) -> Walked:
    """The grown subgraph as `Walked`: row codes are snapshot row numbers (past them, the
    unknown rows in order), object codes the objects' row numbers (past them, unknown ones)."""
    snap = g.snap
    kinds, index = g.kind[: g.n], g.index[: g.n]
    row_nodes = np.flatnonzero((kinds == ROW) | (kinds == OTHER_ROW))
    known = kinds[row_nodes] == ROW
    at = index[row_nodes]
    row_codes = np.where(known, at, 0)
    object_codes = np.where(known, snap.r_obj[row_codes], 0)
    is_part = np.where(known, snap.r_part[row_codes], False)
    other_rows: list[RowRef] = []
    other_objects: dict[uuid.UUID, int] = {}
    for i in np.flatnonzero(~known).tolist():
        ref = g.others[int(at[i])][2]
        assert ref is not None  # an unknown row node is a first-stage row: it has its ref
        row_codes[i] = g.nr + len(other_rows)
        other_rows.append(ref)
        obj = snap.r_index.get(ref.object_id)
        object_codes[i] = (obj if obj is not None and obj < g.nr else
                           g.nr + other_objects.setdefault(ref.object_id, len(other_objects)))
        is_part[i] = ref.is_part
    objects = list(other_objects)
    r_keys = snap.r_keys
    rows_at, objects_at = (np.where(c < g.nr, c, 0) for c in (row_codes, object_codes))
    row_halves = np.stack([snap.r_hi[rows_at], snap.r_lo[rows_at]], axis=1)
    object_halves = np.stack([snap.r_hi[objects_at], snap.r_lo[objects_at]], axis=1)
    for i in np.flatnonzero(~known).tolist():  # ids the snapshot does not know
        ref = other_rows[int(row_codes[i]) - g.nr]
        row_halves[i], object_halves[i] = id_halves([ref.row_id, ref.object_id])

    def row_key(code: int) -> uuid.UUID:
        return r_keys[code] if code < g.nr else other_rows[code - g.nr].row_id

    def object_key(code: int) -> uuid.UUID:
        return r_keys[code] if code < g.nr else objects[code - g.nr]

    u, v, w = g.columns()
    return Walked(n=g.n, u=u, v=v, w=w, seeds=seeds, row_nodes=row_nodes.astype(np.int64),
                  row_codes=row_codes.astype(np.int64),
                  object_codes=object_codes.astype(np.int64), is_part=is_part.astype(bool),
                  row_key=row_key, object_key=object_key, row_halves=row_halves,
                  object_halves=object_halves, hops=hops, truncated=g.truncated,
                  hubs=hubs)
