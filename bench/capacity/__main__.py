"""What one instance of each component does and what the data occupy per document: the figures
docs/scaling.md builds the plan for 100M documents from.

The benchmark starts its own embedded stack (`.brainstream-bench/capacity`, ports = defaults +
2300 + BRAINSTREAM_TEST_PORT_OFFSET, vector columns of MiniLM's 384 dimensions), then:

1. the write path on the empty database (`instances.py`): a consumer applies `--docs` SciFact
   put events as the consumer does (in-process, no broker hop), the embedding stage embeds
   their rows with the static embedder (its vectors zero-padded to 384: a 384-dim vector's
   bytes), then `--minilm-docs` more with MiniLM on one torch thread, as a worker runs it; CPU
   per unit of this process and of Postgres apart, and what the write path added per document
   to each relation;
2. a corpus in bulk as `bench.query` loads it (COPY; SciFact sentences shuffled into documents
   of about six parts, three links each, projected into FalkorDB by the real `OutboxRelay`),
   its entity layer by the heuristic extractor, the Tantivy index by the real writer (timed at
   the second point: what a new API host's replica bootstrap goes at); measured
   (`sizes.py`) at half of `--parts` and at all of it: every Postgres relation (heap, TOAST,
   each index with its access method), the Tantivy files, FalkorDB's used_memory (and
   `GRAPH.MEMORY USAGE`), the namespace's PPR snapshot built as the API builds it
   (tracemalloc, and the bound's own estimate). Per document is the growth between the two
   points (fixed costs drop out), and 100M documents that growth x 100M;
3. `search` (mode hybrid) at concurrency 1 on `--claims` SciFact claims through the engine as
   the API wires it, and the query's MiniLM encode alone on the same claims;
4. pgvector HNSW builds (`hnsw.py`) on `--hnsw` random 384-dim vectors with the migration's
   parameters, one backend: CPU, index size, growth, extrapolated to 10M and 100M vectors.

No target: a diagnostic (the figures are rates and bytes for the plan, not a product against a
baseline); the HNSW rows give their growth against the smallest build of the same run.

Usage: python -m bench.capacity [--parts 40000] [--docs 1000] [--minilm-docs 40]
       [--claims 100] [--hnsw 25000,50000,100000] [--quick] [--out FILE]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from bench.capacity import hnsw, instances, sizes
from bench.capacity.report import Capacity, report
from bench.harness.inprocess import bench_settings, bench_stack
from bench.harness.runenv import (
    bench_parser,
    emit_report,
    load_average,
    log,
    quiet_logging,
)
from bench.query.data import NAMESPACE, grow_to, load_source
from bench.query.entities import bulk_extract, pending_rows
from bench.query.lexical import build_lexical_index

PORT_OFFSET = 2300 + int(os.environ.get("BRAINSTREAM_TEST_PORT_OFFSET", "0"))
QUICK = {"parts": 4000, "docs": 300, "minilm_docs": 15, "claims": 30, "hnsw": "10000,20000"}


def main() -> None:
    """Parse arguments, load, measure, print the Markdown report to stdout."""
    parser = bench_parser(__doc__, "python -m bench.capacity")
    parser.add_argument("--parts", type=int, default=40_000,
                        help="parts of the bulk-loaded corpus the sizes are measured on")
    parser.add_argument("--docs", type=int, default=1000,
                        help="SciFact put events the consumer applies (then embedded, static)")
    parser.add_argument("--minilm-docs", type=int, default=40,
                        help="SciFact documents whose rows the MiniLM stage embeds")
    parser.add_argument("--claims", type=int, default=100, help="searches at concurrency 1")
    parser.add_argument("--hnsw", default="25000,50000,100000",
                        help="comma-separated vector counts of the HNSW builds, or none")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes (a couple of minutes): " + ", ".join(
                            f"--{k.replace('_', '-')} {v}" for k, v in QUICK.items()))
    parser.add_argument("--port-offset", type=int, default=PORT_OFFSET,
                        help="added to every default port of the benchmark's own stack")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    quiet_logging()
    settings = bench_settings("capacity", args.port_offset, "minilm")
    dim = settings.vector_dim
    found = Capacity(command=" ".join(["python -m bench.capacity", *sys.argv[1:]]), dim=dim)
    started = time.perf_counter()
    source = load_source()
    with bench_stack(settings, fresh=True) as stack:
        postmaster = next(s for s in stack.services if s.name == "postgres").running_pid()
        assert postmaster is not None
        found.loads.append(load_average())
        # the write path first, on the empty database: what it adds per document is not
        # mixed with the free space a bulk load leaves in its pages
        found.write_before = {r.name: r.bytes for r in sizes.relations(settings)}
        found.meters.append(instances.consumer(settings, postmaster, args.docs))
        found.meters.append(instances.embedding_stage(
            settings, postmaster, instances.PaddedStatic(dim), "embedding worker: static, rows"))
        found.write_after = {r.name: r.bytes for r in sizes.relations(settings)}
        found.write_counts = sizes.counts(settings, instances.CONSUMER_NS)
        if args.minilm_docs:
            found.meters.append(instances.minilm_stage(settings, postmaster, args.minilm_docs))
        found.loads.append(load_average())
        for point in (args.parts // 2, args.parts):
            log(f"loading to {point:,} parts ...")
            grow_to(settings, source, point, instances.PaddedStatic(dim))
            if pending_rows(settings):
                bulk_extract(settings)
            lexical = instances.metered(
                "lexical index: Tantivy documents written by the writer", postmaster,
                lambda: build_lexical_index(settings)[0])
            measured = sizes.measure(settings, NAMESPACE)
            found.half, found.full = (measured, None) if found.half is None else (
                found.half, measured)
        found.meters.append(lexical)  # the second point's: the index already holds half
        found.loads.append(load_average())
        found.meters += instances.searches(settings, postmaster, NAMESPACE,
                                           source.claims[:args.claims])
        found.loads.append(load_average())
        if args.hnsw != "none":
            found.hnsw = hnsw.build_series(settings.effective_postgres_dsn,
                                           sorted(int(s) for s in args.hnsw.split(",")), dim)
        found.loads.append(load_average())
    emit_report(report(found, time.perf_counter() - started), args.out)


if __name__ == "__main__":
    main()
