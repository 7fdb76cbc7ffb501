"""POST /v1/paths (pipeline/retrieval/graph/paths.py over Postgres) on a synthetic entity graph.

One namespace of `--roots` documents with two parts each; half as many entities, each part
naming three (30 % of the picks Pareto-skewed, so some entities are named very often); a
CO_OCCURS edge per pair named together (evidence: up to 5 of those parts); one link per
document between random documents. Everything is written with COPY (the extraction stage is not
measured here). Random pairs per kind (object->object, entity->entity, object->entity) are
searched at max_hops 2 (the baseline, same pairs, same process) and 4, k = 3, with the default
bounds; the table gives latency percentiles, the ratio to the baseline, the statuses and the
explored subgraph.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass

import psycopg

from bench.harness.inprocess import bench_settings, bench_stack
from bench.harness.runenv import (
    add_reuse_and_out,
    bench_parser,
    emit_report,
    log,
    machine_lines,
    quiet_logging,
)
from bench.harness.timing import percentile
from pipeline.domain.paths import PathQuery
from pipeline.postgres.pool import make_async_pool
from pipeline.retrieval.graph.paths import PathConfig, PathFinder
from pipeline.retrieval.store.paths import PgPathGraph
from pipeline.settings import Settings

PORT_OFFSET = 1500
NS = uuid.UUID("00000000-0000-4000-8000-00000000a7c5")


@dataclass
class Graph:
    roots: list[uuid.UUID]
    entities: list[uuid.UUID]
    counts: dict[str, int]


def load(settings: Settings, n_roots: int, rng: random.Random) -> Graph:
    """The synthetic namespace (see the module's docstring), by COPY."""
    roots = [uuid.uuid4() for _ in range(n_roots)]
    parts = [(uuid.uuid4(), r, i) for r in roots for i in range(2)]
    entities = [uuid.uuid4() for _ in range(max(n_roots // 2, 2))]
    mentions: list[tuple[object, ...]] = []
    together: dict[tuple[uuid.UUID, uuid.UUID], list[uuid.UUID]] = {}
    for part, _, _ in parts:
        named = sorted({entities[min(int(rng.paretovariate(1.2)) - 1, len(entities) - 1)]
                        if rng.random() < 0.3 else rng.choice(entities) for _ in range(3)})
        mentions += [(part, "content", 10 * j, 10 * j + 5, NS, e, "NAME", "xxxxx")
                     for j, e in enumerate(named)]
        for i, a in enumerate(named):
            for b in named[i + 1:]:
                together.setdefault((a, b), []).append(part)
    links = {tuple(rng.sample(roots, 2)) for _ in range(n_roots)}
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn, \
            conn.cursor() as cur:
        with cur.copy("COPY objects (id, namespace_id, kind, title) FROM STDIN") as cp:
            for r in roots:
                cp.write_row((r, NS, "note", "document"))
        with cur.copy("COPY objects (id, namespace_id, kind, parent_id, position, content)"
                      " FROM STDIN") as cp:
            for part, root, i in parts:
                cp.write_row((part, NS, "note", root, i, "x" * 300))
        with cur.copy("COPY entities (id, namespace_id, name, norm, label) FROM STDIN") as cp:
            for i, e in enumerate(entities):
                cp.write_row((e, NS, f"E{i}", f"e{i}", "NAME"))
        with cur.copy("COPY mentions (row_id, field, start_pos, end_pos, namespace_id,"
                      " entity_id, label, text) FROM STDIN") as cp:
            for row in mentions:
                cp.write_row(row)
        with cur.copy("COPY entity_edges (namespace_id, from_id, to_id, edge_type, weight,"
                      " evidence) FROM STDIN") as cp:
            for (a, b), rows in together.items():
                cp.write_row((NS, a, b, "CO_OCCURS", len(rows), rows[:5]))
        with cur.copy("COPY links (namespace_id, from_id, to_id, relation_type) FROM STDIN") as cp:
            for a, b in links:
                cp.write_row((NS, a, b, "refs"))
        cur.execute("UPDATE entities e SET part_count = c.n FROM (SELECT entity_id,"
                    " count(DISTINCT row_id) AS n FROM mentions GROUP BY entity_id) c"
                    " WHERE c.entity_id = e.id")
        cur.execute("ANALYZE")
    return Graph(roots, entities, {"documents": n_roots, "parts": len(parts),
                                   "entities": len(entities), "mentions": len(mentions),
                                   "co_occurs": len(together), "links": len(links)})


async def measure(settings: Settings, graph: Graph, pairs: int, rng: random.Random
                  ) -> list[str]:
    """One table row per (pair kind, max_hops)."""
    pool = await make_async_pool(settings, max_size=2)
    finder = PathFinder(PgPathGraph(pool), PathConfig())
    kinds = {"object->object": (graph.roots, graph.roots),
             "entity->entity": (graph.entities, graph.entities),
             "object->entity": (graph.roots, graph.entities)}
    rows = []
    try:
        for kind, (left, right) in kinds.items():
            chosen = [(rng.choice(left), rng.choice(right)) for _ in range(pairs)]
            chosen = [(a, b) for a, b in chosen if a != b]
            baseline = 0.0
            for hops in (2, 4):
                latencies, statuses, nodes = [], Counter[str](), []
                for a, b in chosen:
                    started = time.perf_counter()
                    answer = await finder.find(NS, PathQuery((a,), (b,), hops, 3))
                    latencies.append(time.perf_counter() - started)
                    statuses[answer.status] += 1
                    nodes.append(answer.explored_nodes)
                p50 = percentile(latencies, 50) * 1000
                baseline = baseline or p50
                status = ", ".join(f"{s} {n}" for s, n in statuses.most_common())
                rows.append(f"| {kind} | {hops} | {p50:.0f} | "
                            f"{percentile(latencies, 95) * 1000:.0f} | {p50 / baseline:.2f} | "
                            f"{status} | {percentile(nodes, 50):.0f} / {max(nodes)} |")
                log(rows[-1])
    finally:
        await pool.close()
    return rows


def main() -> None:
    """Build the graph, measure, print the Markdown report to stdout."""
    parser = bench_parser(__doc__, "python -m bench.query.paths")
    parser.add_argument("--roots", type=int, default=5000, help="documents (two parts each)")
    parser.add_argument("--pairs", type=int, default=30, help="pairs searched per kind")
    add_reuse_and_out(parser, "keep the data of an earlier run (same --roots)")
    args = parser.parse_args()
    quiet_logging()
    rng = random.Random(7)
    settings = bench_settings("paths", PORT_OFFSET, "static")
    with bench_stack(settings, fresh=not args.reuse):
        if args.reuse:
            with psycopg.connect(settings.effective_postgres_dsn) as conn:
                roots = [r[0] for r in conn.execute(
                    "SELECT id FROM objects WHERE namespace_id = %s AND parent_id IS NULL"
                    " ORDER BY id", (NS,))]
                ents = [r[0] for r in conn.execute(
                    "SELECT id FROM entities WHERE namespace_id = %s ORDER BY id", (NS,))]
            graph = Graph(roots, ents, {"documents": len(roots), "entities": len(ents)})
        else:
            log(f"loading {args.roots} documents ...")
            graph = load(settings, args.roots, rng)
        log(f"loaded: {graph.counts}; measuring")
        rows = asyncio.run(measure(settings, graph, args.pairs, rng))
    counts = ", ".join(f"{n} {k}" for k, n in graph.counts.items())
    text = "\n".join([
        "# POST /v1/paths search (Postgres)", "", *machine_lines(), "",
        f"Synthetic namespace: {counts}. k = 3, default bounds; ratio = p50 / p50 at max_hops 2"
        " (same pairs).", "",
        "| pairs | max_hops | p50 ms | p95 ms | ratio | statuses | explored nodes p50 / max |",
        "|-------|----------|--------|--------|-------|----------|--------------------------|",
        *rows])
    emit_report(text, args.out)


if __name__ == "__main__":
    main()
