"""Read-path latency and throughput at 10k, 100k and 1M parts, against bare-query floors.

The benchmark starts its own embedded stack (`.brainstream-bench/query`, ports = defaults +
1000, static embedder: embedding 100k parts with MiniLM takes hours on 2 cores), then for each
scale, cumulatively in one namespace:

1. builds SciFact-derived documents (sentences of the BEIR SciFact corpus shuffled into new
   documents with a fixed seed, unique titles), chunks them with the pipeline's chunker and
   embeds parents and parts with the static embedder, exactly the texts the write path embeds;
2. loads them with binary COPY into `objects` (the non-key indexes dropped before and rebuilt
   after from their own definitions, then VACUUM ANALYZE, as autovacuum would), adds `links`
   (each document cites 3 others) and projects everything into FalkorDB through the real
   `OutboxRelay` (node_sync / edge_sync outbox rows);
3. writes the new rows' entity layer with the `heuristic` extractor: through the real
   extraction stage up to 20k rows to extract, in bulk beyond (`entities.py`; the stage
   writes back about a hundred rows a second here);
4. measures, with the engine built by `pipeline.wiring.build_services` (in-process, asyncio,
   N workers on one queue): `search` (claims of SciFact), `find_exact` (document titles),
   `find_objects` (claims), and `expand` with `max_hops=2` (random documents), each at
   concurrency 1 and 8; the PPR stage alone and `search` in mode auto (`ppr.py`, c=1);
   and the floors on the same data and queries: one bare pgvector top-k over the indexed
   rows (`ORDER BY embedding <=> v LIMIT k`, ef_search as the engine sets it) and one bare
   full-text top-k (`lexical @@ q ORDER BY ts_rank(lexical, q) DESC LIMIT k`, q = the OR of
   the query's lexemes, as the engine's BM25 matches);
5. optionally (`--http`), `search` and `expand` through the real API process (uvicorn) to show
   the HTTP overhead;
6. the lexical index on Tantivy (`lexical.py`, unless `--no-lexical`): built by the real
   writer from its queue, then the SQL BM25 channel, the Tantivy channel and the bare Tantivy
   floor side by side on the same claims (c=1), near-spellings on both engines, and `search`
   on LEXICAL_ENGINE=tantivy at every concurrency.

Targets (issue 40): search p95 (c=1) at most 15 ms at 100k parts and 40 ms at 1M, with at most
12 ms of the serving processes' CPU per call at 100k; throughput at concurrency 8 at least 1.8x
concurrency 1; find_exact and 2-hop expand p95 at most 10 ms at 100k; lexical (Tantivy channel)
p95 within 3x the bare Tantivy floor; the PPR stage p95 under 50 ms.

Modules: `data.py` (corpus, bulk load, relay), `measure.py` (floors, engine, HTTP),
`ppr.py` (the PPR stage), `lexical.py` (the Tantivy lexical index),
`report.py` (tables and targets).

Usage: python -m bench.query [--scales 10000,100000] [--requests 150] [--http] [--reuse]
       [--ppr 100] [--ppr-only] [--ppr-load auto|stage|bulk] [--port-offset 1000]
       [--no-lexical] [--load-only]

At 1M parts (`--scales 10000,100000,1000000`) the data are loaded by COPY with the same triggers
and functions as at 100k (see 2.), not by the write path: a million parts through the consumer
and the embedding worker take hours on 2 cores. Build once with `--load-only`, measure with
`--reuse` on a quiet machine.
"""

from __future__ import annotations

import asyncio
import os
import time

from bench.harness.inprocess import bench_settings, bench_stack, extract_pending
from bench.harness.runenv import add_reuse_and_out, bench_parser, emit_report, log, quiet_logging
from bench.query.data import graph_and_link_counts, grow_to, load_source, part_count
from bench.query.entities import bulk_extract, pending_rows
from bench.query.footprint import footprint, wait_settled
from bench.query.lexical import build_lexical_index, measure_lexical
from bench.query.measure import make_inputs, measure_scale, slices
from bench.query.ppr import measure_ppr
from bench.query.report import ScaleResult, report
from pipeline.embedding.embedders.static import StaticEmbedder
from pipeline.services.base import Service
from pipeline.wiring.services import SEARCH

# The extraction stage writes back about a hundred rows a second here: beyond this many rows to
# extract, the benchmark writes the entity layer in bulk (`entities.py`).
STAGE_MAX_ROWS = 20_000
PORT_OFFSET = int(os.environ.get("BRAINSTREAM_BENCH_PORT_OFFSET", "1000"))  # or --port-offset


def main() -> None:
    """Parse arguments, build each scale, measure, print the Markdown report to stdout."""
    parser = bench_parser(__doc__, "python -m bench.query")
    parser.add_argument("--scales", default="10000,100000",
                        help="comma-separated part counts, ascending (cumulative namespace)")
    parser.add_argument("--requests", type=int, default=150,
                        help="calls per operation at concurrency 1 (twice as many at 8)")
    parser.add_argument("--concurrency", default="1,8", help="comma-separated worker counts")
    parser.add_argument("--http", action="store_true",
                        help="also measure search and expand through the API process (at the "
                             "first scale only: the HTTP overhead does not depend on scale)")
    parser.add_argument("--budget", type=float, default=120.0,
                        help="seconds per (operation, concurrency): no call starts after it, "
                             "so a slow operation is measured on fewer calls")
    parser.add_argument("--breakdown", type=int, default=50,
                        help="claims for the per-step breakdown of search (0: skip)")
    parser.add_argument("--ppr", type=int, default=100,
                        help="claims for the PPR stage and search in mode auto, after the "
                             "heuristic extractor ran over the parts (0: skip)")
    parser.add_argument("--port-offset", type=int, default=PORT_OFFSET,
                        help="added to every default port of the benchmark's own stack")
    parser.add_argument("--ppr-load", choices=("auto", "stage", "bulk"), default="auto",
                        help="how the entity layer of new rows is written: the extraction "
                             f"stage, bulk, or auto (the stage up to {STAGE_MAX_ROWS:,} rows)")
    parser.add_argument("--ppr-only", action="store_true",
                        help="measure only the PPR stage and search in modes hybrid and auto")
    parser.add_argument("--no-lexical", dest="lexical", action="store_false",
                        help="skip the Tantivy lexical index (its build, channels and floor)")
    parser.add_argument("--load-only", action="store_true",
                        help="build the scales (and the lexical index and entity layer as the "
                             "other options ask) and stop: measure later with --reuse")
    add_reuse_and_out(parser, "keep the data of an earlier run (only grow it)")
    args = parser.parse_args()
    quiet_logging()
    scales = sorted(int(s) for s in args.scales.split(","))
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    # without the Tantivy index (--no-lexical) the engine must answer from the SQL BM25
    settings = bench_settings("query", args.port_offset, "static",
                              api_port=8000 + args.port_offset,
                              **({} if args.lexical else {"lexical_engine": "postgres"}))
    Service.start_timeout = 600.0  # FalkorDB's index rebuild, loaded: minutes at 1M parts
    k = SEARCH.candidate_k
    ef = min(max(2 * k, 40), 1000)  # what PgPartSearcher.search_dense sets
    source = load_source()
    embedder = StaticEmbedder()
    started = time.perf_counter()
    results: list[ScaleResult] = []
    # the SQL BM25 channel is measured beside Tantivy (lexical.py): keep its postings
    with bench_stack(settings, fresh=not args.reuse, sql_postings=True):
        for parts in scales:
            log(f"scale {parts} parts: loading ...")
            load = grow_to(settings, source, parts, embedder)
            if args.lexical:
                _, load["lexical index (Tantivy writer)"] = build_lexical_index(settings)
            docs, links = graph_and_link_counts(settings)
            stored = part_count(settings)
            log(f"scale {parts}: {stored} parts, {docs} documents, {links} links; measuring")
            need = sum(stop - start for start, stop in
                       slices(args.requests, concurrencies).values()) + 50
            if args.load_only:
                if args.ppr and pending_rows(settings):
                    bulk_extract(settings)
                log(f"scale {parts}: loaded (--load-only), {footprint(settings)[0][0]}")
                continue
            inputs = make_inputs(settings, source, embedder, need)
            log(f"scale {parts}: the services idle after {wait_settled(settings):.0f} s")
            http = args.http and parts == scales[0]  # the overhead does not depend on scale
            timings = [] if args.ppr_only else asyncio.run(
                measure_scale(settings, inputs, args, concurrencies, ef, k, http))
            if args.lexical and not args.ppr_only:
                timings += asyncio.run(measure_lexical(settings, inputs, args.requests,
                                                       concurrencies, args.budget))
            notes = []
            if args.ppr:
                how, pending = args.ppr_load, pending_rows(settings)
                if how == "auto":
                    how = "stage" if pending <= STAGE_MAX_ROWS else "bulk"
                if not pending:
                    rows, seconds, way = 0, 0.0, "an earlier run (--reuse)"
                elif how == "stage":
                    rows, seconds = extract_pending(settings, "heuristic")
                    way = "the real extraction stage"
                else:
                    rows, seconds = bulk_extract(settings)
                    way = "bulk: same extractor, set-based writes (bench/query/entities.py)"
                load[f"entity extraction (heuristic, {how})"] = seconds
                notes.append(f"Entity extraction (heuristic) by {way}: {rows} rows in "
                             f"{seconds:.0f} s ({rows / max(seconds, 1e-9):.0f} rows/s)")
                ppr_timings, note = asyncio.run(measure_ppr(settings, inputs, args.ppr,
                                                            args.budget))
                timings += ppr_timings
                notes.append(note)
            disk, memory = footprint(settings)
            results.append(ScaleResult(stored, docs, links, load, timings, notes, disk, memory))
    text = report(results, args, time.perf_counter() - started, ef, k,
                  lexical_engine=settings.lexical_engine)
    emit_report(text, args.out)


if __name__ == "__main__":
    main()
