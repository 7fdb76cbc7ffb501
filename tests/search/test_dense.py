"""The dense channel on enough rows for HNSW to matter: a selective filter never starves it, the
exact path equals brute force, and another tenant's closer vectors never leak in."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg.types.json import Jsonb

from pipeline.domain.read_model import Filters
from pipeline.retrieval.store.search import PgPartSearcher

pytestmark = pytest.mark.stack

N_A = 2000  # rows in the searched namespace; 1% of them are "rare"
N_B = 600  # rows of another tenant, all "rare" and all closer to the query than any of A's
K = 10
RARE = Filters(properties=(("bucket", ("rare",)),))


def _unit(m: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def dense(db: psycopg.Connection[Any]) -> dict[str, Any]:
    rng = np.random.default_rng(11)
    query = _unit(rng.normal(size=(1, 256)))[0]
    ns_a, ns_b = uuid.uuid4(), uuid.uuid4()
    vec_a = _unit(rng.normal(size=(N_A, 256)))
    vec_b = _unit(query + 0.05 * rng.normal(size=(N_B, 256)))
    rare_a = set(rng.choice(N_A, size=N_A // 100, replace=False).tolist())
    ids_a = [uuid.uuid4() for _ in range(N_A)]
    rows = [(ids_a[i], ns_a, f"a {i}", Jsonb({"bucket": "rare" if i in rare_a else "common"}),
             vec_a[i]) for i in range(N_A)]
    rows += [(uuid.uuid4(), ns_b, f"b {i}", Jsonb({"bucket": "rare"}), vec_b[i])
             for i in range(N_B)]
    with db.cursor() as cur:
        # synthetic rows straight into the table (the write path would only slow this down);
        # the HNSW index is live, as in production
        cur.executemany("WITH o AS (INSERT INTO objects (id, namespace_id, kind, title,"
                        " properties) VALUES (%(id)s, %(ns)s, 'doc', %(title)s, %(props)s))"
                        " SELECT 1", [dict(zip(("id", "ns", "title", "props"), r[:4], strict=True))
                                      for r in rows])
        cur.executemany("UPDATE object_embeddings SET embedding = %s, embed_status = 'done'"
                        " WHERE id = %s", [(r[4], r[0]) for r in rows])
    db.execute("ANALYZE objects")
    db.execute("ANALYZE object_embeddings")
    sims = vec_a @ query
    return {"a": ns_a, "query": query, "ids": ids_a, "sims": sims, "rare": rare_a}


def _brute(dense: dict[str, Any], only: set[int] | None = None) -> list[tuple[uuid.UUID, float]]:
    order = np.argsort(-dense["sims"], kind="stable")
    picked = [i for i in order if only is None or i in only][:K]
    return [(dense["ids"][i], float(dense["sims"][i])) for i in picked]


def test_selective_filter_never_starves_hnsw(dense: dict[str, Any], aio: asyncio.Runner,
                                            searcher: PgPartSearcher) -> None:
    # threshold below the 20 rare rows: the HNSW path with iterative scan must serve the query
    hnsw = PgPartSearcher(searcher.pool, exact_dense_threshold=5)
    hits = aio.run(hnsw.search_dense(dense["a"], dense["query"].tolist(), RARE, [], K))
    assert len(hits) == K
    rare_ids = {dense["ids"][i] for i in dense["rare"]}
    assert {h.id for h in hits} <= rare_ids
    truth = _brute(dense, dense["rare"])
    recall = len({h.id for h in hits} & {t[0] for t in truth}) / K
    assert recall >= 0.8
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hnsw.dense_fallbacks == 0  # served by the index, not by the exact safety net


def test_exact_path_equals_brute_force(dense: dict[str, Any], aio: asyncio.Runner,
                                       searcher: PgPartSearcher) -> None:
    hits = aio.run(searcher.search_dense(dense["a"], dense["query"].tolist(), RARE, [], K))
    truth = _brute(dense, dense["rare"])
    assert [h.id for h in hits] == [t[0] for t in truth]
    for hit, (_, sim) in zip(hits, truth, strict=True):
        assert hit.score == pytest.approx(sim, abs=1e-5)


def test_unfiltered_hnsw_has_recall_and_no_leak(dense: dict[str, Any], aio: asyncio.Runner,
                                                searcher: PgPartSearcher) -> None:
    # 2000 rows > the default exact threshold: HNSW over an index shared with tenant B, whose
    # vectors all sit closer to the query than any of A's
    hits = aio.run(searcher.search_dense(dense["a"], dense["query"].tolist(), Filters(), [], K))
    assert len(hits) == K
    assert {h.id for h in hits} <= set(dense["ids"])
    truth = _brute(dense)
    assert len({h.id for h in hits} & {t[0] for t in truth}) / K >= 0.8
    assert searcher.dense_fallbacks == 0


def test_plain_hnsw_would_starve(dense: dict[str, Any], db: psycopg.Connection[Any]) -> None:
    """The control: without iterative scan, the same filtered query returns too few rows (so the
    starvation test above can fail)."""
    with db.transaction():
        db.execute("SET LOCAL hnsw.iterative_scan = off")
        db.execute("SET LOCAL enable_seqscan = off")
        rows = db.execute(
            "SELECT o.id FROM object_embeddings e JOIN objects o ON o.id = e.id"
            " WHERE o.namespace_id = %s AND o.properties @> %s AND NOT e.has_live_parts"
            " ORDER BY e.embedding <=> %s LIMIT %s",
            (dense["a"], Jsonb({"bucket": "rare"}), dense["query"], K)).fetchall()
    assert len(rows) < K


@pytest.mark.parametrize("threshold", [5, 5000])  # HNSW with its growing fetch, and exact
def test_range_search_is_every_row_within_the_floor(dense: dict[str, Any], aio: asyncio.Runner,
                                                    searcher: PgPartSearcher,
                                                    threshold: int) -> None:
    ranged = PgPartSearcher(searcher.pool, exact_dense_threshold=threshold)
    sims = dense["sims"]
    for floor in (0.15, 0.05):  # ~1% and ~20% of the rows: one fetch, and several
        within = {dense["ids"][i] for i in np.flatnonzero(sims >= floor)}
        hits, cut = aio.run(ranged.search_dense_within(dense["a"], dense["query"].tolist(),
                                                       floor, Filters(), [], 1000))
        got = [h.id for h in hits]
        assert not cut and len(got) == len(set(got))
        # B's rows are all closer than the floor: none leaks; HNSW may miss a row or two
        assert set(got) <= within and len(got) >= 0.95 * len(within)
        assert all(h.score >= floor for h in hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # the bound: more rows within the floor than the cap is a cut answer
    hits, cut = aio.run(ranged.search_dense_within(dense["a"], dense["query"].tolist(), -1.0,
                                                   Filters(), [], 50))
    assert cut and len(hits) == 50
    # filters apply inside the range search
    hits, _ = aio.run(ranged.search_dense_within(dense["a"], dense["query"].tolist(), -1.0,
                                                 RARE, [], 1000))
    assert {h.id for h in hits} == {dense["ids"][i] for i in dense["rare"]}
