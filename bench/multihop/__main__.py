"""Multi-hop retrieval: HotpotQA passage recall and SciFact nDCG@10, lexical / hybrid / ppr / auto.

The benchmark starts its own embedded stack (`.brainstream-bench/multihop-<embedder>`, ports =
defaults + 1300), ingests SciFact (5,183 abstracts) and HotpotQA train100 (994 passages)
through the real write path in-process (`bench/harness/inprocess.py`, `bench/quality/data.py`:
apply, embed, relay), then for each extractor (`heuristic`, and `spacy` when its package loads)
empties the entity layer, runs the extraction stage (`pipeline.entities.stage.ExtractionStage`)
over every row, and evaluates every query through the engine as
`pipeline.wiring.build_services` wires it:

- `lexical`: the lexical channel alone, ranked and promoted by the engine;
- `hybrid`: `engine.search` (lexical + trigram + dense, RRF), today's answer;
- `ppr`: `engine.search(mode="ppr")`: the hybrid list fused with the PPR stage's list;
- `auto`: `engine.search(mode="auto")`: PPR from the query's strong seeds (the words it writes
  as names), hybrid when it has none.

Metrics: passage recall@2 and @5 on HotpotQA (|gold ∩ top k| / |gold|, 2 gold passages each,
averaged), nDCG@10 on SciFact train. The sweep: the stage fusion (RRF's k, or PPR re-ranking
the hybrid list's best N objects), with and without the hybrid list's best rows as weak PPR
seeds. Targets: HotpotQA R@5 >= 0.88 with auto; SciFact nDCG@10 of auto within 0.005 of
hybrid.

Usage: python -m bench.multihop [--embedder minilm|static] [--extractors heuristic,spacy]
       [--rrf-ks 1,2,5,10,20,60] [--rerank-depths 0,30] [--passage-weights 0,0.05]
       [--passage-seeds 5,30]
       [--datasets hotpotqa,scifact] [--scifact-queries N] [--reuse] [--resume-extraction]
       [--stack NAME] [--port-offset N] [--no-stage-latency]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from dataclasses import replace
from typing import cast

import psycopg

from bench.harness.inprocess import bench_settings, bench_stack, extract_pending, md_table
from bench.harness.runenv import (
    add_reuse_and_out,
    bench_parser,
    emit_report,
    log,
    machine_lines,
    quiet_logging,
)
from bench.multihop.eval import (
    CachedChannel,
    ModeRun,
    Variant,
    costs,
    engines,
    run_mode,
    snapshot_ready,
    stage_latency,
)
from bench.quality.data import Dataset, counts, ingest, load_hotpot, load_scifact
from bench.quality.ref import evaluate
from bench.query.lexical import build_lexical_index
from pipeline.embedding.settings import EmbedderName
from pipeline.lexical.vocab import refresh_vocab
from pipeline.retrieval.engine import RetrievalEngine
from pipeline.services.base import Service
from pipeline.settings import Settings
from pipeline.wiring import build_services
from pipeline.wiring.services import PPR

PORT_OFFSET = 1300
TARGET_R5 = 0.88
SCIFACT_SLACK = 0.005

# The entity layer, emptied before each extractor runs (the stage then sees every row pending).
WIPE = ("TRUNCATE mentions, entity_edges, entity_merges, entity_aliases, entity_recount,"
        " entity_proposal_queue, entity_name_vectors, message_mentions,"
        " entities",
        "UPDATE entity_extraction SET status = 'pending', extracted_hash = NULL, attempts = 0,"
        " lease_until = NULL, error = NULL, recount = false, triples = 0")


def extract(settings: Settings, extractor: str, *, wipe: bool) -> tuple[int, float]:
    """Extract every pending row with `extractor` (the entity layer emptied first when
    `wipe`): (rows, seconds)."""
    if wipe:
        with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
            for statement in WIPE:
                conn.execute(statement)
    return extract_pending(settings, extractor)


def entity_counts(settings: Settings, namespace: uuid.UUID) -> str:
    """Entities, mentions and RELATES edges of a namespace."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM entities WHERE namespace_id = %(ns)s),"
            " (SELECT count(*) FROM mentions WHERE namespace_id = %(ns)s),"
            " (SELECT count(*) FROM entity_edges WHERE namespace_id = %(ns)s"
            " AND edge_type = 'RELATES')", {"ns": namespace}).fetchone()
    assert row is not None
    return f"{row[0]} entities, {row[1]} mentions, {row[2]} RELATES edges"


async def measure(args: argparse.Namespace, datasets: list[Dataset]) -> str:
    """Start the stack, ingest, extract with each extractor, evaluate; the Markdown report."""
    # FalkorDB rebuilds its indexes at start (--reuse): minutes on a loaded machine
    Service.start_timeout = 600.0
    settings = bench_settings(args.stack or f"multihop-{args.embedder}", args.port_offset,
                              cast(EmbedderName, args.embedder), ppr_walk=args.ppr_walk)
    hotpot = next(ds for ds in datasets if ds.name == "hotpotqa")
    scifact = next((ds for ds in datasets if ds.name == "scifact"), None)
    info: dict[str, str] = {}
    rows: list[list[object]] = []
    sweep: list[list[object]] = []
    verdicts: list[str] = []
    with bench_stack(settings, fresh=not args.reuse):
        services = await build_services(settings)
        try:
            info |= await asyncio.to_thread(ingest, settings, services, datasets, args.reuse)
            with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
                while refresh_vocab(conn) is None:  # the worker's sweep does this in the pipeline
                    time.sleep(0.1)
                # autovacuum may not have analysed the fresh tables yet: without statistics the
                # lexical channel's plan ran past the statement timeout on HotpotQA
                conn.execute("ANALYZE")
            if settings.lexical_engine == "tantivy":  # no read host's follower runs here
                build_lexical_index(settings)
            for ds in datasets:
                docs, parts, _ = counts(settings, ds.namespace)
                info[ds.name] = f"{docs} documents, {parts} parts ({info.get(ds.name, '')})"
            wired = services.engine
            cached = [CachedChannel(c) for c in wired.channels.values()]
            key_of = {ds.name: {ds.object_id(key): key for key in ds.docs} for ds in datasets}
            lexical = RetrievalEngine(wired.searcher, wired.reader, wired.result_sets,
                                      wired.catalog, wired.embed_query,
                                      replace(wired.config, exact_channels=("lexical",)),
                                      channels=[c for c in cached if c.name == "lexical"])
            wired_variant = Variant(wired.config.ppr_rrf_k,
                                    PPR.passage_seed_weight, PPR.passage_seeds,
                                    wired.config.ppr_rerank_depth)
            base = engines(wired, wired_variant, cached)

            async def score(engine: RetrievalEngine, ds: Dataset, mode: str
                            ) -> tuple[dict[str, float], ModeRun]:
                run = await run_mode(engine, ds, key_of[ds.name], mode, args.concurrency)
                return evaluate(ds, run.ranked), run

            async def scifact_ndcg(engine: RetrievalEngine, mode: str) -> tuple[object, str]:
                """SciFact nDCG@10 in `mode` and how many queries ran PPR ("-": not run)."""
                if scifact is None:
                    return "-", "-"
                found, run = await score(engine, scifact, mode)
                degraded = f", {run.degraded} degraded" if run.degraded else ""
                return found["nDCG@10"], f"{run.ran_ppr}/{len(scifact.queries)}{degraded}"

            hybrid_ndcg: object = "-"
            for label, engine in (("lexical", lexical), ("hybrid", base)):
                log(f"{label} ...")
                found = (await score(engine, hotpot, "hybrid"))[0]
                ndcg, _ = await scifact_ndcg(engine, "hybrid")
                rows.append([label, "-", found["R@2"], found["R@5"], ndcg, "-", "-"])
                log(f"row: {rows[-1]}")
                hybrid_ndcg = ndcg
            for extractor in args.extractors:
                try:
                    extracted, seconds = await asyncio.to_thread(
                        extract, settings, extractor, wipe=not args.resume_extraction)
                except Exception as exc:  # a missing optional package or model: say so
                    info[f"extractor {extractor}"] = f"not run: {type(exc).__name__}: {exc}"
                    continue
                info[f"extractor {extractor}"] = (
                    f"{extracted} rows in {seconds:.1f} s ({extracted / max(seconds, 1e-9):.0f}"
                    f" rows/s); hotpotqa: {entity_counts(settings, hotpot.namespace)}")
                for variant in [wired_variant] + [v for v in args.variants
                                                  if v != wired_variant]:
                    engine = engines(wired, variant, cached)
                    for ds in datasets:
                        await snapshot_ready(engine, ds.namespace)
                    log(f"{extractor}, {variant.label} ...")
                    hp_ppr, run_ppr = await score(engine, hotpot, "ppr")
                    hp_auto, run_auto = await score(engine, hotpot, "auto")
                    sf_auto, sf_ran = await scifact_ndcg(engine, "auto")
                    sweep.append([extractor, variant.label, hp_ppr["R@2"], hp_ppr["R@5"],
                                  hp_auto["R@2"], hp_auto["R@5"], sf_auto, sf_ran])
                    log(f"sweep row: {sweep[-1]}")
                    if variant != wired_variant:
                        continue
                    for ds in datasets if args.stage_latency else []:
                        info[f"PPR stage latency, {ds.name} ({extractor})"] = (
                            await stage_latency(engine, ds))
                        log(info[f"PPR stage latency, {ds.name} ({extractor})"])
                    for mode, hp, run in (("ppr", hp_ppr, run_ppr), ("auto", hp_auto, run_auto)):
                        rows.append([mode, extractor, hp["R@2"], hp["R@5"],
                                     sf_auto if mode == "auto" else "-",
                                     f"{run.ran_ppr}/{len(hotpot.queries)}"
                                     + (f", {run.degraded} degraded" if run.degraded else ""),
                                     costs(run)])
                    verdicts.append(
                        f"- {extractor}: HotpotQA R@5 with auto {hp_auto['R@5']:.3f} (target >= "
                        f"{TARGET_R5}): **{'PASS' if hp_auto['R@5'] >= TARGET_R5 else 'FAIL'}**")
                    if isinstance(sf_auto, float) and isinstance(hybrid_ndcg, float):
                        ok = sf_auto >= hybrid_ndcg - SCIFACT_SLACK
                        verdicts.append(
                            f"- {extractor}: SciFact nDCG@10 auto {sf_auto:.3f} vs hybrid "
                            f"{hybrid_ndcg:.3f} (within {SCIFACT_SLACK}): "
                            f"**{'PASS' if ok else 'FAIL'}**")
        finally:
            await services.close()
    lines = ["# Multi-hop retrieval (bench/multihop)", "", *machine_lines(),
             f"- embedder: {args.embedder}; command: python -m bench.multihop "
             + " ".join(sys.argv[1:]), *(f"- {k}: {v}" for k, v in info.items()), "",
             f"## Wired settings (stage fusion {wired_variant.label})", "",
             md_table(["mode", "extractor", "HotpotQA R@2", "R@5", "SciFact nDCG@10",
                       "ran PPR (HotpotQA)", "PPR subgraph (HotpotQA)"], rows), "",
             *verdicts, "", "## Sweep: RRF k of the stage fusion, weak passage seeds", "",
             md_table(["extractor", "variant", "ppr R@2", "ppr R@5", "auto R@2", "auto R@5",
                       "SciFact auto nDCG@10", "SciFact ran PPR"], sweep)]
    return "\n".join(lines)


def main() -> None:
    """Parse arguments, measure, print the Markdown report to stdout."""
    parser = bench_parser(__doc__, "python -m bench.multihop")
    parser.add_argument("--embedder", default="minilm", choices=["minilm", "static"])
    parser.add_argument("--extractors", default="heuristic,spacy")
    parser.add_argument("--rrf-ks", default="1,2,5,10,20,60")
    parser.add_argument("--passage-weights", default="0,0.05")
    parser.add_argument("--rerank-depths", default="0",
                        help="PPR re-ranks the hybrid list's best N objects (0: RRF with each "
                             "of --rrf-ks)")
    parser.add_argument("--passage-seeds", default="5",
                        help="how many of the hybrid list's best rows are weak seeds")
    parser.add_argument("--resume-extraction", action="store_true",
                        help="do not empty the entity layer first: the stage goes on with the "
                             "rows an interrupted earlier run left pending (same extractor)")
    parser.add_argument("--datasets", default="hotpotqa,scifact",
                        help="hotpotqa, and scifact unless left out (its ingestion is the long "
                             "part with MiniLM)")
    parser.add_argument("--scifact-queries", type=int, default=None,
                        help="evaluate N evenly spaced SciFact train queries (default: all 809)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--no-stage-latency", dest="stage_latency", action="store_false",
                        help="skip timing the PPR stage query by query (python -m bench.query "
                             "--ppr measures it; a quality sweep need not wait for it)")
    parser.add_argument("--stack", default=None,
                        help="the stack's data dir under .brainstream-bench (default "
                             "multihop-<embedder>): one per embedder and extractor lets a "
                             "second run reuse each entity layer")
    parser.add_argument("--ppr-walk", default="snapshot", choices=["snapshot", "sql"],
                        help="where the PPR stage walks (PPR_WALK): its in-memory snapshot "
                             "(waited for before each evaluation) or SQL; same answers")
    parser.add_argument("--port-offset", type=int, default=PORT_OFFSET,
                        help="added to every default port (two stacks at once need two)")
    add_reuse_and_out(parser, "keep the stack's data from an earlier run and skip ingestion")
    args = parser.parse_args()
    quiet_logging()
    args.extractors = [e.strip() for e in args.extractors.split(",") if e.strip()]
    # a re-rank reads no RRF k: one variant per depth (k 0)
    args.variants = list(dict.fromkeys(
        Variant(0 if int(d) else int(k), float(w), int(n) if float(w) else 0, int(d))
        for d in args.rerank_depths.split(",") for n in args.passage_seeds.split(",")
        for w in args.passage_weights.split(",") for k in args.rrf_ks.split(",")))
    names = {d.strip() for d in args.datasets.split(",")}
    datasets = [load_hotpot()] + ([load_scifact(args.scifact_queries)]
                                  if "scifact" in names else [])
    emit_report(asyncio.run(measure(args, datasets)), args.out)


if __name__ == "__main__":
    main()
