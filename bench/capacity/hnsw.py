"""pgvector HNSW build times at growing sizes, for the capacity benchmark: random unit vectors
of the passages' dimension in a scratch table, the index built with the parameters of the
project's own migration (`object_embeddings_hnsw`), one backend (no parallel workers), the
backend's CPU time and the index's size per size. Random vectors have no cluster structure, so
each insertion searches as far as it can: an upper bound for real embeddings of that size."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import psycopg
from pgvector.psycopg import register_vector

from bench.harness.runenv import REPO, log

MIGRATIONS = REPO / "migrations"
TABLE = "capacity_hnsw"
# the build's graph must fit here or pgvector builds on disk, far slower (it says so in a NOTICE)
MAINTENANCE_WORK_MEM = "1GB"
SEED = 39


@dataclass(frozen=True)
class HnswBuild:
    """One build: vectors indexed, wall and backend CPU seconds, index bytes, whether the graph
    outgrew maintenance_work_mem."""

    vectors: int
    wall_s: float
    cpu_s: float
    index_bytes: int
    spilled: bool


def index_parameters(folder: Path = MIGRATIONS) -> str:
    """The `WITH (...)` of the passages' HNSW index as the latest migration creating it has it."""
    found = None
    for path in sorted(folder.glob("*.sql")):
        found = re.search(r"object_embeddings_hnsw ON object_embeddings USING hnsw "
                          r"\(embedding vector_cosine_ops\)\s+WITH \(([^)]*)\)",
                          path.read_text(encoding="utf-8")) or found
    if found is None:
        raise RuntimeError(f"no object_embeddings_hnsw parameters in {folder}")
    return found.group(1)


def _random_unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def build_series(dsn: str, sizes: list[int], dim: int) -> list[HnswBuild]:
    """Grow the scratch table to each size (ascending) and build the index on it once."""
    parameters = index_parameters()
    rng = np.random.default_rng(SEED)
    builds: list[HnswBuild] = []
    notices: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        conn.execute(f"CREATE TABLE {TABLE} (id int PRIMARY KEY, embedding vector({dim}))")
        conn.execute(f"SET maintenance_work_mem = '{MAINTENANCE_WORK_MEM}'")
        conn.execute("SET max_parallel_maintenance_workers = 0")
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        backend = psutil.Process(int(row[0]))
        have = 0
        try:
            for size in sizes:
                with conn.cursor() as cur, cur.copy(
                        f"COPY {TABLE} (id, embedding) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(["int4", "vector"])
                    for i, vector in enumerate(_random_unit(rng, size - have, dim), have):
                        copy.write_row((i, vector))
                have = size
                conn.execute(f"VACUUM (ANALYZE) {TABLE}")
                log(f"HNSW: building on {size:,} vectors ({parameters}) ...")
                notices.clear()
                before = backend.cpu_times()
                started = time.perf_counter()
                conn.execute(f"CREATE INDEX {TABLE}_index ON {TABLE} USING hnsw"
                             f" (embedding vector_cosine_ops) WITH ({parameters})")
                wall = time.perf_counter() - started
                after = backend.cpu_times()
                row = conn.execute(f"SELECT pg_relation_size('{TABLE}_index')").fetchone()
                assert row is not None
                builds.append(HnswBuild(size, wall, (after.user + after.system)
                                        - (before.user + before.system), int(row[0]),
                                        any("maintenance_work_mem" in n for n in notices)))
                log(f"HNSW: {size:,} vectors in {wall:.1f} s")
                conn.execute(f"DROP INDEX {TABLE}_index")
        finally:
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    return builds


def extrapolate_seconds(builds: list[HnswBuild], target: int) -> tuple[float, float]:
    """CPU seconds to build `target` vectors with the graph in memory, two ways: cpu = c n log n
    fitted on the largest build (each insertion searches a graph whose depth grows as log n:
    the asymptote, a low estimate), and cpu = c n^a with `a` from the two largest builds (the
    growth measured here, caches outgrown included: a high one when a > 1 + 1/ln n)."""
    last = builds[-1]
    low = last.cpu_s / (last.vectors * np.log(last.vectors)) * target * np.log(target)
    if len(builds) < 2:
        return float(low), float(low)
    prev = builds[-2]
    a = np.log(last.cpu_s / prev.cpu_s) / np.log(last.vectors / prev.vectors)
    return float(low), float(last.cpu_s * (target / last.vectors) ** a)


def growth_exponent(builds: list[HnswBuild]) -> float:
    """`a` of cpu = c n^a between the two largest builds (1.0: linear)."""
    if len(builds) < 2:
        return float("nan")
    last, prev = builds[-1], builds[-2]
    return float(np.log(last.cpu_s / prev.cpu_s) / np.log(last.vectors / prev.vectors))
