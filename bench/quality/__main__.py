"""Retrieval quality through the real pipeline: SciFact (train) and HotpotQA (100 questions).

For each embedder (default: MiniLM, the quality target, then static) the benchmark starts its own
embedded stack (`.brainstream-bench/quality-<embedder>`, ports = defaults + 900), ingests the
SciFact corpus and the HotpotQA passages through the real write path in-process (`apply_batch`
in consumer-sized batches, then `EmbeddingService`, then `OutboxRelay`; see
`bench/harness/inprocess.py`), builds the engine exactly as `pipeline.wiring.build_services` does
(the API's factory), and evaluates every query through the engine in several modes:

- `lexical`: only the lexical (BM25) channel, ranked and promoted by the engine
  (`RetrievalEngine.rank_and_page` with that one channel);
- `dense`: only the dense (pgvector) channel, the same way;
- `trigram` and `lexical+dense` (diagnostics): the trigram channel alone, and the hybrid without
  the trigram channel;
- `hybrid`: `RetrievalEngine.search`, the product's answer (lexical + trigram + dense, RRF).

Promoted objects are the documents (a document counts once however many of its parts hit).
Metrics: nDCG@10 (linear gain from the graded qrels), recall@10 and recall@100 on the 809 SciFact
train queries; passage recall@2 and recall@5 on HotpotQA (2 gold passages each, by title).
Results come from the first page of 100 (the engine's `max_results`).

In the same run, reference BM25 (`rank_bm25.BM25Okapi`, k1=0.9, b=0.4) on simple lowercase
word tokens of title + text, per document; and, to check our lexical channel's implementation on
the very same texts, BM25 with Lucene's IDF (as ours) on the stored parts (parent title + chunk),
promoted by the engine's own `promote`. Agreement with our lexical channel: overlap@10 and the
Spearman correlation of our ranking with the reference scores.

Engine configurations (`--configs`): the wired defaults first, then variants (decay 0 is the
benchmark setting: every document shares one ingest time), each reported.

Modules: `data.py` (datasets, ingestion), `modes.py` (the modes through the engine,
the trigram cache), `ref.py` (metrics, reference BM25, agreement), `report.py`.

Usage: python -m bench.quality [--embedders minilm,static] [--reuse] [--scifact-queries N]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from collections.abc import Sequence
from typing import cast

import numpy as np
import psycopg

from bench.harness.inprocess import bench_settings, bench_stack
from bench.harness.runenv import (
    BENCH_DIR,
    add_reuse_and_out,
    bench_parser,
    emit_report,
    log,
    quiet_logging,
)
from bench.quality.data import Dataset, counts, ingest, load_hotpot, load_scifact, stored_parts
from bench.quality.modes import (
    MODES,
    WEIGHT_KEYS,
    WHAT_IF,
    TrigramCache,
    channel_weights,
    config_label,
    fill_trigram,
    parse_configs,
    run_modes,
)
from bench.quality.ref import Reference, evaluate, formula_check, lexical_agreement, reference_bm25
from bench.quality.report import EmbedderResult, report
from bench.query.lexical import build_lexical_index
from pipeline.embedding.settings import EmbedderName
from pipeline.lexical.vocab import refresh_vocab
from pipeline.retrieval.engine import EngineConfig, RetrievalEngine
from pipeline.wiring import Services, build_services

PORT_OFFSET = 900


async def evaluate_embedder(embedder: EmbedderName, args: argparse.Namespace,
                            datasets: Sequence[Dataset]) -> EmbedderResult:
    """Start the embedder's stack, ingest, evaluate every configuration, stop the stack."""
    # The wired defaults of the engine (what the API runs with) come from these settings.
    settings = bench_settings(f"quality-{embedder}", PORT_OFFSET, embedder)
    sql = "postgres" in {settings.lexical_engine, *args.lexical_engines.split(",")}
    with bench_stack(settings, fresh=not args.reuse, sql_postings=sql):
        services = await build_services(settings)
        extra_services: list[Services] = []
        try:
            info = await asyncio.to_thread(ingest, settings, services, datasets, args.reuse)
            with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
                while refresh_vocab(conn) is None:  # the worker's sweep does this in the pipeline
                    time.sleep(0.1)
            for ds in datasets:
                docs, parts, _ = counts(settings, ds.namespace)
                info[ds.name] = f"{docs} documents, {parts} parts ({info.get(ds.name, '')})"
            wired = services.engine
            # the wired engine's lexical engine first, then the others asked for
            lexical_engines = list(dict.fromkeys(
                [settings.lexical_engine, *(e.strip() for e in args.lexical_engines.split(",")
                                            if e.strip())]))
            engines = {settings.lexical_engine: wired}
            if "tantivy" in lexical_engines:  # wired (the default) or asked for
                documents, took = build_lexical_index(settings)
                info["Tantivy lexical index"] = f"{documents} documents in {took:.0f} s"
            for lex in lexical_engines[1:]:
                other = await build_services(settings.model_copy(update={"lexical_engine": lex}))
                extra_services.append(other)
                engines[lex] = other.engine
            wired_weights = dict(wired.config.channel_weights)
            wired_config = {"k": float(wired.config.candidate_k),
                            "rrf": float(wired.config.rrf_k),
                            "decay": wired.config.decay_lambda,
                            **{key: wired_weights.get(names[0], 1.0)
                               for key, names in WEIGHT_KEYS.items()}}
            configs = [wired_config] + [c for c in parse_configs(args.configs)
                                        if c != wired_config]
            tables: dict[str, dict[str, dict[str, float]]] = {}
            agreement: dict[str, dict[str, float]] = {}
            seconds: dict[str, float] = {}
            refs: dict[str, Reference] = {}
            key_maps: dict[str, dict[uuid.UUID, str]] = {}
            for ds in datasets:
                key_of = {ds.object_id(key): key for key in ds.docs}
                parts = stored_parts(settings, ds.namespace)
                part_parent = {pid: parent for pid, parent, _ in parts}
                key_maps[ds.name] = key_of | {pid: key_of[par] for pid, par in
                                              part_parent.items()}
                started = time.perf_counter()
                refs[ds.name] = reference_bm25(ds, parts, key_of)
                seconds[f"reference BM25 {ds.name}"] = time.perf_counter() - started
            cache = TrigramCache(BENCH_DIR / "quality-trigram-cache.json",
                                 int(max(c["k"] for c in configs)),
                                 wired.searcher.trigram_threshold)
            for ds in datasets:
                started = time.perf_counter()
                await fill_trigram(wired, ds, cache, args.trigram_concurrency)
                seconds[f"trigram channel {ds.name}"] = time.perf_counter() - started
            if cache.seconds:
                info["trigram channel"] = (
                    f"{len(cache.seconds)} queries run this time, mean "
                    f"{np.mean(cache.seconds):.2f} s, p50 {np.median(cache.seconds):.2f} s, "
                    f"max {max(cache.seconds):.2f} s per call "
                    f"({args.trigram_concurrency} at a time)")
            variants = [(config, lex) for lex in lexical_engines for config in configs]
            for number, (config, lex) in enumerate(variants):
                label = (config_label(config) + f", lexical={lex}"
                         + (" (wired defaults)" if number == 0 else ""))
                channels = engines[lex].channels
                engine = RetrievalEngine(
                    wired.searcher, wired.reader, wired.result_sets, wired.catalog,
                    wired.embed_query,
                    EngineConfig(candidate_k=int(config["k"]), rrf_k=int(config["rrf"]),
                                 decay_lambda=config["decay"],
                                 evidence_n=wired.config.evidence_n,
                                 channel_weights=channel_weights(config),
                                 exact_channels=engines[lex].config.exact_channels),
                    channels=[channels[name] for name in channels if name != "ppr"])
                rows: dict[str, dict[str, float]] = {}
                for ds in datasets:
                    log(f"{embedder}: {ds.name}, {label}: {len(ds.queries)} queries ...")
                    runs = await run_modes(engine, ds, key_maps[ds.name], cache,
                                           args.concurrency, args.verify if number == 0 else 0)
                    seconds[f"{ds.name} {label}"] = runs.seconds
                    if runs.verified:
                        info[f"engine.search check, {ds.name}"] = (
                            f"{runs.verified - runs.mismatches}/{runs.verified} queries: same "
                            "documents in the same order as the hybrid mode")
                    for mode in MODES + WHAT_IF:
                        rows.setdefault(mode, {}).update(
                            {f"{ds.name} {m}": v for m, v in
                             evaluate(ds, runs.runs[mode]).items()})
                    ref = refs[ds.name]
                    for name, ref_runs in (
                            ("BM25 ref (docs, rank_bm25)", ref.doc_runs),
                            ("BM25 ref (parts, Lucene IDF, engine promotion rrf_k=60)",
                             ref.part_runs),
                            ("BM25 ref (parts, Lucene IDF, best part)", ref.part_best_runs)):
                        rows.setdefault(name, {}).update(
                            {f"{ds.name} {m}": v for m, v in evaluate(ds, ref_runs).items()})
                    if number == 0:
                        agreement[ds.name] = lexical_agreement(ds, runs, ref) | (
                            await formula_check(settings, engine, ds, runs))
                tables[label] = rows
            return EmbedderResult(embedder, info, tables, agreement, seconds)
        finally:
            for other in extra_services:
                await other.close()
            await services.close()


def main() -> None:
    """Parse arguments, run every embedder, print the Markdown report to stdout."""
    parser = bench_parser(__doc__, "python -m bench.quality")
    parser.add_argument("--embedders", default="minilm,static",
                        help="comma-separated: minilm, static (default both, MiniLM first)")
    parser.add_argument("--configs",
                        default="k=50,rrf=60,decay=0;k=100,rrf=60,decay=0;k=50,rrf=20,decay=0;"
                                "k=50,rrf=10,decay=0",
                        help="extra engine configurations after the wired defaults, "
                             "';'-separated k=candidate_k,rrf=rrf_k,decay=decay_lambda,"
                             "lex=w,near=w,dense=w (channel weights, 1 by default)")
    parser.add_argument("--lexical-engines", default="postgres",
                        help="comma-separated lexical engines to evaluate each configuration "
                             "on (postgres, tantivy); the wired one comes first")
    parser.add_argument("--scifact-queries", type=int, default=None,
                        help="evaluate only the first N train queries (default: all 809)")
    parser.add_argument("--concurrency", type=int, default=4,
                        help="queries evaluated at once (quality only, not a latency figure)")
    parser.add_argument("--trigram-concurrency", type=int, default=2,
                        help="trigram channel calls at once while filling its cache")
    parser.add_argument("--verify", type=int, default=20,
                        help="queries per dataset also run through engine.search to check "
                             "that the hybrid mode is its answer")
    add_reuse_and_out(parser, "keep the stack's data from an earlier run and skip ingestion")
    args = parser.parse_args()
    quiet_logging()
    args.argv = sys.argv[1:]
    datasets = [load_scifact(args.scifact_queries), load_hotpot()]
    started = time.perf_counter()
    results = []
    for name in [e.strip() for e in args.embedders.split(",") if e.strip()]:
        if name not in ("minilm", "static"):
            raise SystemExit(f"unknown embedder {name!r}")
        results.append(asyncio.run(evaluate_embedder(cast(EmbedderName, name), args,
                                                     datasets)))
    text = report(results, datasets, args, time.perf_counter() - started)
    emit_report(text, args.out)


if __name__ == "__main__":
    main()
