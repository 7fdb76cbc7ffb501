"""The snapshot's array walk (pipeline/retrieval/ppr/arraywalk.py) against the hop-by-hop walk
(pipeline/retrieval/ppr/sqlwalk.py) reading the same snapshot through `EntitySnapshot.hop`:
on random entity layers (parts and roots, dead rows and merged entities, hubs, RELATES and
POSSIBLY_SAME edges, seeds the snapshot does not know) and random bounds, the two grow the very
same subgraph (node numbers, edges in order, rows, objects, hubs, hops, `truncated`); and the
snapshot's seed lookup (names, aliases, folds; kept current by `apply`)."""

from __future__ import annotations

import asyncio
import uuid

import numpy as np
from hypothesis import given, settings, strategies as st

from pipeline.domain.entity_reads import EntityRef
from pipeline.domain.entity_snapshot import (
    EntityState,
    KeyState,
    SnapshotBuild,
    SnapshotLink,
    SnapshotRow,
)
from pipeline.entities.names import fold, normalise
from pipeline.retrieval.ppr.arraywalk import array_walk
from pipeline.retrieval.ppr.model import PprConfig, RowRef, Walked
from pipeline.retrieval.ppr.snapshot import EntitySnapshot
from pipeline.retrieval.ppr.sqlwalk import sql_walk

NS = uuid.uuid4()


def _layer(seed: int) -> EntitySnapshot:
    rng = np.random.default_rng(seed)
    ne, nr = int(rng.integers(3, 50)), int(rng.integers(3, 90))
    entities = sorted(uuid.UUID(int=int(rng.integers(1, 2**62)) << 64 | i) for i in range(ne))
    rows = sorted(uuid.UUID(int=int(rng.integers(1, 2**62)) << 64 | i) for i in range(nr))
    roots = [i for i in range(nr) if rng.random() < 0.4] or [0]
    parent = [i if i in roots else int(rng.choice(roots)) for i in range(nr)]
    live = rng.random(nr) < 0.9
    m = int(rng.integers(0, 6 * nr))
    pairs_r = rng.integers(0, nr, m)
    pairs_e = np.minimum(rng.geometric(0.08, m) - 1, ne - 1)  # a few popular entities
    counts = np.zeros(ne, dtype=np.int64)
    for e in range(ne):
        counts[e] = len({int(r) for r in pairs_r[pairs_e == e] if live[r]})
    kinds = [("RELATES", None), ("POSSIBLY_SAME", "held"), ("POSSIBLY_SAME", "verified")]
    links = []
    for _ in range(int(rng.integers(0, ne))):
        a, b = (int(x) for x in rng.integers(0, ne, 2))
        kind, status = kinds[int(rng.integers(0, 3))]
        links.append(SnapshotLink(entities[a], entities[b], kind, status, f"p{a % 2}"))
    build = SnapshotBuild(
        xmin=1, entity_ids=entities, entity_counts=counts,
        entity_live=rng.random(ne) < 0.9,
        rows=[SnapshotRow(rows[i], rows[parent[i]], parent[i] != i, bool(live[i]))
              for i in range(nr)],
        mention_rows=pairs_r.astype(np.int64), mention_entities=pairs_e.astype(np.int64),
        links=links)
    snap = EntitySnapshot(NS, build, 0.0)
    if seed % 2:  # changes since the build: override lists, an entity and a row first seen now
        born, late = uuid.uuid4(), uuid.uuid4()
        changed = {rows[int(i)]: (*(entities[int(e)] for e in rng.integers(0, ne, 3)), born)
                   for i in rng.integers(0, nr, 4)}
        snap.apply(KeyState(rows=[SnapshotRow(late, rows[0], True, True)],
                            mentions={**changed, late: (born, entities[0])},
                            entities=[EntityState(born, 5, True)]), 1.0)
    return snap


def _flat(w: Walked) -> dict[str, object]:
    return {"n": w.n, "u": w.u.tolist(), "v": w.v.tolist(), "w": w.w.tolist(),
            "seeds": w.seeds, "rows": w.row_nodes.tolist(),
            "row_ids": [w.row_key(c) for c in w.row_codes.tolist()],
            "objects": [w.object_key(c) for c in w.object_codes.tolist()],
            "parts": w.is_part.tolist(), "hops": w.hops, "truncated": w.truncated,
            "hubs": list(w.hubs.items())}


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10_000), max_nodes=st.integers(1, 120),
       max_edges=st.integers(0, 200), rows_per_entity=st.integers(1, 12),
       frontier=st.integers(1, 12), max_hops=st.integers(1, 3), hub=st.integers(1, 30),
       n_seeds=st.integers(0, 4), n_weak=st.integers(0, 4), strangers=st.booleans())
def test_the_array_walk_grows_the_hop_walks_subgraph(
        seed: int, max_nodes: int, max_edges: int, rows_per_entity: int, frontier: int,
        max_hops: int, hub: int, n_seeds: int, n_weak: int, strangers: bool) -> None:
    snap = _layer(seed)
    rng = np.random.default_rng(seed + 1)
    cfg = PprConfig(max_nodes=max_nodes, max_edges=max_edges, rows_per_entity=rows_per_entity,
                    frontier=frontier, max_hops=max_hops, push_epsilon=1e-3)
    picked = [snap.e_keys[int(i)] for i in rng.integers(0, len(snap.e_keys), n_seeds)]
    if strangers:  # a seed entity the snapshot does not know
        picked.append(uuid.uuid4())
    picked = list(dict.fromkeys(picked))
    entities = [(e, 1.0 / max(1, len(picked))) for e in picked]
    weak: list[tuple[RowRef, float]] = []
    for i in rng.integers(0, len(snap.r_keys), n_weak).tolist():
        weak.append((RowRef(snap.r_keys[i], snap.r_object[i], bool(snap.r_part[i])), 0.01))
    if strangers:  # a first-stage row newer than the snapshot
        weak.append((RowRef(uuid.uuid4(), snap.r_keys[0], True), 0.01))
    weak = list({r.row_id: (r, w) for r, w in weak}.values())
    start: dict[uuid.UUID, EntityRef] = {}
    hops = asyncio.run(sql_walk(snap, NS, cfg, entities, weak, float(hub), dict(start)))
    arrays = array_walk(snap, cfg, entities, weak, float(hub), dict(start))
    assert _flat(arrays) == _flat(hops)


def test_seeds_are_matched_on_the_snapshots_names_and_kept_current() -> None:
    names = ["New York", "New York Times", "Zürich Bank", "Gone Corp"]
    entities = sorted(uuid.uuid4() for _ in names)
    build = SnapshotBuild(
        xmin=1, entity_ids=entities, entity_counts=np.array([3, 2, 1, 1]),
        entity_live=np.array([True, True, True, False]), rows=[],
        mention_rows=np.empty(0, dtype=np.int64), mention_entities=np.empty(0, dtype=np.int64),
        links=[], entity_names=names, entity_norms=[normalise(n) for n in names],
        aliases=[("nyt", entities[1]), ("gc", entities[3])])
    snap = EntitySnapshot(NS, build, 0.0)

    def found(keys: list[str], folds: tuple[str, ...] = ()) -> set[tuple[str, str, str]]:
        return {(m.key, m.method, m.entity.name) for m in snap.match_names(keys, list(folds))}

    assert found(["new york times"]) == {("new york times", "exact", "New York Times")}
    assert found(["nyt"]) == {("nyt", "alias", "New York Times")}
    assert found([], (fold("zurich-bank"),)) == {("zurich bank", "fold", "Zürich Bank")}
    assert found(["gone corp", "gc"]) == set()  # merged away: never a seed
    [m] = snap.match_names(["new york"], [])
    assert (m.entity.id, m.entity.part_count) == (entities[0], 3)
    # a new entity and a moved alias arrive with the entities' states
    fresh = uuid.uuid4()
    snap.apply(KeyState(entities=[
        EntityState(fresh, 4, True, "Big Apple Ltd", "big apple ltd", ("nyc",)),
        EntityState(entities[0], 3, True, "New York", "new york", ())]), 1.0)
    assert found(["big apple ltd", "nyc"]) == {("big apple ltd", "exact", "Big Apple Ltd"),
                                               ("nyc", "alias", "Big Apple Ltd")}
    snap.apply(KeyState(entities=[EntityState(entities[1], 2, True, "New York Times",
                                              "new york times", ())]), 2.0)
    assert found(["nyt"]) == set()  # its alias went (a merge moved it)
    snap.apply(KeyState(entities=[EntityState(entities[1], 2, True)]), 3.0)
    assert found(["new york times"]) == {("new york times", "exact", "New York Times")}


def _one_sided(with_entities: bool) -> EntitySnapshot:
    """A namespace's snapshot with entities and no rows (every row hard-deleted meanwhile), or
    rows and no entities (nothing extracted yet)."""
    entities = [uuid.UUID(int=i + 1) for i in range(3)] if with_entities else []
    rows = [] if with_entities else [uuid.UUID(int=100 + i) for i in range(3)]
    return EntitySnapshot(NS, SnapshotBuild(
        xmin=1, entity_ids=entities, entity_counts=np.zeros(len(entities), dtype=np.int64),
        entity_live=np.ones(len(entities), dtype=bool),
        rows=[SnapshotRow(r, r, False, True) for r in rows],
        mention_rows=np.empty(0, dtype=np.int64), mention_entities=np.empty(0, dtype=np.int64),
        links=[]), 0.0)


def test_a_snapshot_with_one_side_empty_walks_as_the_hop_walk() -> None:
    """Seeds on a snapshot that has entities but no rows, or rows but no entities, walk (the
    fuzz test found the first one out of bounds), and as the hop walk does."""
    cfg = PprConfig(max_nodes=50, max_edges=50, push_epsilon=1e-3)
    for with_entities in (True, False):
        snap = _one_sided(with_entities)
        entities = [(e, 0.5) for e in snap.e_keys[:2]] + [(uuid.uuid4(), 0.5)]
        weak = [(RowRef(r, r, False), 0.01) for r in snap.r_keys[:2]]
        hops = asyncio.run(sql_walk(snap, NS, cfg, entities, weak, 10.0, {}))
        arrays = array_walk(snap, cfg, entities, weak, 10.0, {})
        assert _flat(arrays) == _flat(hops)
