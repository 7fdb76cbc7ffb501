"""Retrieval quality through the real pipeline: SciFact (train) and HotpotQA (100 questions).

For each embedder (default: MiniLM, the quality target, then static) the benchmark starts its own
embedded stack (`.brainstream-bench/quality-<embedder>`, ports = defaults + 900), ingests the
SciFact corpus and the HotpotQA passages through the real write path in-process (`apply_batch`
in consumer-sized batches, then `EmbeddingService`, then `OutboxRelay`; see `readbench.py`),
builds the engine exactly as `api.wiring.build_services` does, and evaluates every query through
the engine in several modes:

- `lexical`: only the lexical (BM25) channel, ranked and promoted by the engine
  (`RetrievalEngine._rank_and_page` with that one channel);
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

Usage: python bench/quality.py [--embedders minilm,static] [--reuse] [--scifact-queries N]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import logging
import math
import re
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import psycopg
from rank_bm25 import BM25Okapi
from readbench import (
    BENCH_DIR,
    DATASETS,
    apply_events,
    bench_settings,
    bench_stack,
    embed_and_relay,
    log,
    machine_lines,
    md_table,
)
from scipy.stats import spearmanr

from api.wiring import Services, build_services
from pipeline.domain.read_model import Filters, Hit, RowMeta, SearchQuery
from pipeline.domain.settings import EmbedderName, Settings
from pipeline.ops.vocab import refresh_vocab
from pipeline.retrieval.engine import EngineConfig, RetrievalEngine
from pipeline.retrieval.fusion import promote, rrf
from pipeline.stores.postgres.search import PgPartSearcher
from schemas.events import wrap_bare_object

PORT_OFFSET = 900
SOURCE = "bench.quality"
KIND = "doc"
SCIFACT = DATASETS / "scifact"
HOTPOT = DATASETS / "hotpotqa_train100"
NS_SCIFACT = uuid.uuid5(uuid.NAMESPACE_URL, "brainstream-bench/quality/scifact")
NS_HOTPOT = uuid.uuid5(uuid.NAMESPACE_URL, "brainstream-bench/quality/hotpotqa")
MODES = ("lexical", "dense", "trigram", "lexical+dense", "hybrid")
# Not the engine: the same channel lists, each promoted to documents by its best part, then
# fused by RRF over documents (see `doc_level`), written a second time in the benchmark; the
# engine fuses the same way, so these rows must equal the corresponding modes (a cross-check).
WHAT_IF = ("check: lexical, best part", "check: dense, best part",
           "check: lexical+dense, doc-level RRF", "check: hybrid, doc-level RRF")
TARGET_NDCG = 0.70
PAGE = 100  # the engine's max_results: recall@100 reads the first page of 100
_WORD = re.compile(r"\w+")


# -- datasets --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dataset:
    """Documents (key -> (title, text)), queries (id -> text) and graded judgements."""

    name: str
    namespace: uuid.UUID
    docs: dict[str, tuple[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    cutoffs: tuple[int, ...]

    def object_id(self, key: str) -> uuid.UUID:
        """The deterministic object id of a document."""
        return uuid.uuid5(self.namespace, f"{self.name}:{key}")


def load_scifact(max_queries: int | None) -> Dataset:
    """SciFact corpus, train queries and qrels; a subset of N queries takes N evenly spaced
    over the train query ids in numeric order."""
    docs: dict[str, tuple[str, str]] = {}
    with gzip.open(SCIFACT / "corpus.jsonl.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                docs[str(row["_id"])] = (str(row.get("title") or ""), str(row.get("text") or ""))
    texts: dict[str, str] = {}
    with open(SCIFACT / "queries.jsonl", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                texts[str(row["_id"])] = str(row["text"])
    qrels: dict[str, dict[str, int]] = {}
    with open(SCIFACT / "qrels" / "train.tsv", encoding="utf-8") as handle:
        next(handle)  # header
        for line in handle:
            qid, did, score = line.split()
            qrels.setdefault(qid, {})[did] = int(score)
    ids = sorted(qrels, key=int)
    if max_queries and max_queries < len(ids):  # evenly spaced over the ids, deterministic
        step = len(ids) / max_queries
        ids = [ids[int(i * step)] for i in range(max_queries)]
    return Dataset("scifact", NS_SCIFACT, docs, {q: texts[q] for q in ids},
                   {q: qrels[q] for q in ids}, (10, 100))


def load_hotpot() -> Dataset:
    """HotpotQA's 994 passages (title -> joined sentences) and 100 questions with 2 gold titles."""
    with open(HOTPOT / "hotpotqa_train_corpus.json", encoding="utf-8") as handle:
        corpus = json.load(handle)
    docs = {str(title): (str(title), "".join(sentences)) for title, sentences in corpus.items()}
    with open(HOTPOT / "hotpotqa_train.json", encoding="utf-8") as handle:
        questions = json.load(handle)
    queries = {str(q["_id"]): str(q["question"]) for q in questions}
    qrels = {str(q["_id"]): {str(title): 1 for title, _ in q["supporting_facts"]}
             for q in questions}
    return Dataset("hotpotqa", NS_HOTPOT, docs, queries, qrels, (2, 5))


def put_events(dataset: Dataset) -> list[dict[str, Any]]:
    """One `object.put` per document: title as title, text as content (chunked into parts)."""
    events = []
    for key, (title, text) in dataset.docs.items():
        data: dict[str, Any] = {"id": str(dataset.object_id(key)), "kind": KIND, "content": text}
        if title:
            data["title"] = title
        events.append(wrap_bare_object(data, dataset.namespace, SOURCE,
                                       event_id=f"{dataset.name}:{key}"))
    return events


# -- metrics ---------------------------------------------------------------------------------


def ndcg_at(ranked: Sequence[str], rels: dict[str, int], k: int) -> float:
    """nDCG@k with linear gain (as BEIR's pytrec_eval `ndcg_cut`)."""
    dcg = sum(rels.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted(rels.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: Sequence[str], rels: dict[str, int], k: int) -> float:
    """Fraction of the relevant documents in the top k."""
    relevant = {d for d, g in rels.items() if g > 0}
    return len(relevant.intersection(ranked[:k])) / len(relevant) if relevant else 0.0


def metric_names(dataset: Dataset) -> list[str]:
    """The metric columns reported for a dataset."""
    names = ["nDCG@10"] if dataset.name == "scifact" else []
    return names + [f"R@{k}" for k in dataset.cutoffs]


def evaluate(dataset: Dataset, runs: dict[str, list[str]]) -> dict[str, float]:
    """Mean metrics over the queries of `runs` (query id -> ranked document keys)."""
    sums: dict[str, float] = {}
    for qid, ranked in runs.items():
        rels = dataset.qrels[qid]
        values = {f"R@{k}": recall_at(ranked, rels, k) for k in dataset.cutoffs}
        if dataset.name == "scifact":
            values["nDCG@10"] = ndcg_at(ranked, rels, 10)
        for name, value in values.items():
            sums[name] = sums.get(name, 0.0) + value
    return {name: total / len(runs) for name, total in sums.items()}


# -- reference BM25 --------------------------------------------------------------------------


def tokens(text: str) -> list[str]:
    """Simple lowercase word tokens (no stemming, no stop words)."""
    return _WORD.findall(text.lower())


class LuceneBM25(BM25Okapi):
    """BM25Okapi with Lucene's non-negative IDF, ln(1 + (N - df + 0.5) / (df + 0.5)), the
    formula of our lexical channel (`pipeline.retrieval.bm25.idf`)."""

    def _calc_idf(self, nd: dict[str, int]) -> None:
        for word, freq in nd.items():
            self.idf[word] = math.log(1.0 + (self.corpus_size - freq + 0.5) / (freq + 0.5))


@dataclass
class Reference:
    """Reference rankings per query: documents, and parts promoted like the engine does."""

    doc_runs: dict[str, list[str]] = field(default_factory=dict)
    doc_scores: dict[str, dict[str, float]] = field(default_factory=dict)
    part_runs: dict[str, list[str]] = field(default_factory=dict)
    part_best_runs: dict[str, list[str]] = field(default_factory=dict)
    part_top: dict[str, list[uuid.UUID]] = field(default_factory=dict)
    part_scores: dict[str, dict[uuid.UUID, float]] = field(default_factory=dict)


def reference_bm25(dataset: Dataset, parts: list[tuple[uuid.UUID, uuid.UUID, str]],
                   key_of: dict[uuid.UUID, str], k1: float = 0.9, b: float = 0.4
                   ) -> Reference:
    """Doc-level BM25Okapi on title + text; part-level Lucene-IDF BM25 on the stored parts,
    promoted to documents both by the engine's `promote` (after RRF at k=60, as a single
    channel) and by the best part alone."""
    keys = list(dataset.docs)
    doc_index = BM25Okapi([tokens(f"{t} {x}") for t, x in dataset.docs.values()], k1=k1, b=b)
    part_index = LuceneBM25([tokens(text) for _, _, text in parts], k1=k1, b=b)
    meta = {pid: RowMeta(id=pid, parent_id=parent, position=None, content=None, title=None,
                         properties={}) for pid, parent, _ in parts}
    ref = Reference()
    for qid, text in dataset.queries.items():
        q = tokens(text)
        scores = doc_index.get_scores(q)
        order = np.argsort(-scores, kind="stable")[:PAGE]
        ref.doc_runs[qid] = [keys[i] for i in order]
        ref.doc_scores[qid] = {keys[i]: float(scores[i]) for i in range(len(keys))}
        pscores = part_index.get_scores(q)
        porder = [i for i in np.argsort(-pscores, kind="stable")[:PAGE * 3] if pscores[i] > 0]
        hits = [Hit(parts[i][0], float(pscores[i])) for i in porder]
        promoted = promote(rrf({"ref": hits}), meta)
        ref.part_runs[qid] = [key_of[p.id] for p in promoted][:PAGE]
        ref.part_best_runs[qid] = list(dict.fromkeys(
            key_of[meta[h.id].parent_id or h.id] for h in hits))[:PAGE]
        ref.part_top[qid] = [h.id for h in hits[:10]]
        ref.part_scores[qid] = {parts[i][0]: float(pscores[i]) for i in porder}
    return ref


def mean_spearman(pairs: list[tuple[list[float], list[float]]]) -> float:
    """Mean Spearman rho over queries (queries with fewer than 3 items or no variance skipped)."""
    rhos = []
    for ours, theirs in pairs:
        if len(ours) >= 3 and len(set(ours)) > 1 and len(set(theirs)) > 1:
            rhos.append(float(spearmanr(ours, theirs).statistic))
    return float(np.mean(rhos)) if rhos else float("nan")


# -- evaluation through the engine -----------------------------------------------------------


@dataclass
class ModeRuns:
    """Ranked document keys per mode and query, and our lexical channel's part hits."""

    runs: dict[str, dict[str, list[str]]] = field(
        default_factory=lambda: {m: {} for m in MODES + WHAT_IF})
    lexical_parts: dict[str, list[Hit]] = field(default_factory=dict)
    seconds: float = 0.0
    verified: int = 0
    mismatches: int = 0


class TrigramCache:
    """The trigram channel's hits per (dataset, query) at the largest candidate_k, on disk.

    The channel costs seconds per natural-language query (see docs/performance.md), so it runs
    once per query and its answer is reused by every mode, configuration, embedder and later
    run. That is exact: the channel's SQL orders by (score desc, id) and then limits, so its top
    k is a prefix of its top K >= k, and it reads only texts, which every stack stores alike
    (object and part ids are derived from the dataset keys).
    """

    def __init__(self, path: Path, k: int, threshold: float) -> None:
        self.path = path
        self.key = f"v2,threshold={threshold}"
        self.k = k
        self.data: dict[str, dict[str, list[tuple[str, float]]]] = {}
        if path.exists():
            stored = json.loads(path.read_text(encoding="utf-8"))
            if stored.get("key") == self.key and int(stored.get("k", 0)) >= k:
                self.data = stored["hits"]
                self.k = int(stored["k"])
        self.seconds: list[float] = []

    def get(self, dataset: str, qid: str) -> list[Hit] | None:
        hits = self.data.get(dataset, {}).get(qid)
        return None if hits is None else [Hit(uuid.UUID(i), s) for i, s in hits]

    def put(self, dataset: str, qid: str, hits: list[Hit]) -> None:
        self.data.setdefault(dataset, {})[qid] = [(str(h.id), h.score) for h in hits]

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps({"key": self.key, "k": self.k, "hits": self.data}),
                             encoding="utf-8")


async def fill_trigram(engine: RetrievalEngine, dataset: Dataset, cache: TrigramCache,
                       concurrency: int) -> None:
    """Run the trigram channel for every query not yet cached (timing each call)."""
    todo = [(q, t) for q, t in dataset.queries.items() if cache.get(dataset.name, q) is None]
    if not todo:
        return
    log(f"trigram channel: {len(todo)} {dataset.name} queries to run (cached afterwards) ...")
    sem = asyncio.Semaphore(concurrency)
    done = 0

    async def one(qid: str, text: str) -> None:
        nonlocal done
        async with sem:
            started = time.perf_counter()
            hits = await engine.searcher.search_trigram(
                dataset.namespace, engine._query_text(text), Filters(), (), cache.k)
            cache.seconds.append(time.perf_counter() - started)
        cache.put(dataset.name, qid, hits)
        done += 1
        if done % 50 == 0:
            cache.save()
            log(f"trigram channel: {done}/{len(todo)}, mean "
                f"{np.mean(cache.seconds):.2f} s per query")

    await asyncio.gather(*(one(q, t) for q, t in todo))
    cache.save()


def doc_level(channels: dict[str, list[Hit]], key_of: dict[uuid.UUID, str], rrf_k: int
              ) -> list[str]:
    """What-if ranking: each channel's part hits become a document ranking (a document at the
    rank of its best part), and RRF fuses the document rankings (ties by key)."""
    scores: dict[str, float] = {}
    for hits in channels.values():
        docs = list(dict.fromkeys(key_of[h.id] for h in hits))
        for rank, key in enumerate(docs, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (rrf_k + rank)
    return sorted(scores, key=lambda key: (-scores[key], key))[:PAGE]


async def run_modes(engine: RetrievalEngine, dataset: Dataset, key_of: dict[uuid.UUID, str],
                    cache: TrigramCache, concurrency: int, verify: int) -> ModeRuns:
    """Every query through the engine in every mode (a few queries at a time).

    Each mode is the engine's own ranking (`_rank_and_page`: RRF, promotion, hydration, decay,
    first page of 100) over the channels of that mode; `hybrid` takes all three channels, which
    is what `RetrievalEngine.search` does after gathering them. For the first `verify` queries
    `engine.search` itself is also called and must return the same documents in the same order.
    """
    out = ModeRuns()
    ns = dataset.namespace
    no_filters = Filters()
    k = engine.config.candidate_k
    embed = engine.embed_query
    assert embed is not None

    async def one(number: int, qid: str, raw: str) -> None:
        text = engine._query_text(raw)  # stripped, as search() does before every channel
        lexical = await engine.searcher.search_lexical(ns, text, no_filters, (), k)
        trigram = cache.get(dataset.name, qid)
        assert trigram is not None
        trigram = trigram[:k]
        dense = await engine.searcher.search_dense(ns, await embed(text), no_filters, (), k)
        channels = {"lexical": {"lexical": lexical}, "dense": {"dense": dense},
                    "trigram": {"trigram": trigram},
                    "lexical+dense": {"lexical": lexical, "dense": dense},
                    "hybrid": {"lexical": lexical, "trigram": trigram, "dense": dense}}
        for mode, chans in channels.items():
            page = await engine._rank_and_page(ns, text, chans, PAGE, None)
            out.runs[mode][qid] = [key_of[o.id] for o in page.objects]
        rrf_k = engine.config.rrf_k
        for mode, chans in zip(WHAT_IF, (channels["lexical"], channels["dense"],
                                         channels["lexical+dense"], channels["hybrid"]),
                               strict=True):
            out.runs[mode][qid] = doc_level(chans, key_of, rrf_k)
        out.lexical_parts[qid] = lexical
        if number < verify:
            page = await engine.search(ns, SearchQuery(raw, limit=PAGE))
            out.verified += 1
            if [key_of[o.id] for o in page.objects] != out.runs["hybrid"][qid]:
                out.mismatches += 1

    started = time.perf_counter()
    sem = asyncio.Semaphore(concurrency)

    async def guarded(number: int, qid: str, text: str) -> None:
        async with sem:
            await one(number, qid, text)

    await asyncio.gather(*(guarded(i, q, t) for i, (q, t) in
                           enumerate(dataset.queries.items())))
    out.seconds = time.perf_counter() - started
    return out


def parse_configs(text: str) -> list[dict[str, float]]:
    """`k=50,rrf=60,decay=0.002;k=100,...` -> list of {k, rrf, decay}."""
    configs = []
    for chunk in text.split(";"):
        if not chunk.strip():
            continue
        values = {"k": 50.0, "rrf": 60.0, "decay": 0.0}
        for pair in chunk.split(","):
            name, value = pair.split("=")
            if name.strip() not in values:
                raise SystemExit(f"unknown config key {name!r} (k, rrf, decay)")
            values[name.strip()] = float(value)
        configs.append(values)
    return configs


def config_label(config: dict[str, float]) -> str:
    """A short label of an engine configuration."""
    return f"candidate_k={int(config['k'])}, rrf_k={int(config['rrf'])}, decay={config['decay']:g}"


# -- one embedder ----------------------------------------------------------------------------


@dataclass
class EmbedderResult:
    """Everything measured for one embedder."""

    embedder: str
    ingest: dict[str, str]
    tables: dict[str, dict[str, dict[str, float]]]  # config -> row -> metric -> value
    agreement: dict[str, dict[str, float]]          # dataset -> measure -> value
    seconds: dict[str, float]


def stored_parts(settings: Settings, namespace: uuid.UUID) -> list[tuple[uuid.UUID, uuid.UUID,
                                                                           str]]:
    """(part id, parent id, parent title + chunk) of the namespace's visible parts."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        rows = conn.execute(
            "SELECT id, parent_id, coalesce(context_title, '') || ' ' || coalesce(content, '')"
            " FROM objects WHERE namespace_id = %s AND parent_id IS NOT NULL"
            " AND deleted_at IS NULL ORDER BY id", (namespace,)).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def counts(settings: Settings, namespace: uuid.UUID) -> tuple[int, int, int]:
    """(documents, parts, rows embedded) of a namespace."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE parent_id IS NULL),"
            " count(*) FILTER (WHERE parent_id IS NOT NULL),"
            " count(*) FILTER (WHERE embed_status = 'done')"
            " FROM objects WHERE namespace_id = %s", (namespace,)).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def ingest(settings: Settings, services: Services, datasets: Sequence[Dataset], reuse: bool
           ) -> dict[str, str]:
    """Write every dataset through the write path unless already complete (with --reuse)."""
    info: dict[str, str] = {}
    todo = []
    for ds in datasets:
        docs, _, done = counts(settings, ds.namespace)
        if reuse and docs == len(ds.docs) and done > 0:
            info[ds.name] = "reused from an earlier run"
        else:
            todo.append(ds)
    if not todo:
        return info
    assert services.embedder is not None, "the embedder did not load"
    started = time.perf_counter()
    events = [e for ds in todo for e in put_events(ds)]
    apply_events(settings, events)
    applied_s = time.perf_counter() - started
    log(f"applied {len(events)} puts in {applied_s:.1f}s; embedding ...")
    rows, embed_s, relay_s = embed_and_relay(settings, services.embedder)
    for ds in todo:
        info[ds.name] = "ingested in this run"
    info["write path"] = (f"apply {applied_s:.0f} s, embed {rows} rows in {embed_s:.0f} s "
                          f"({rows / max(embed_s, 1e-9):.1f}/s), relay {relay_s:.0f} s")
    log(info["write path"])
    return info


async def evaluate_embedder(embedder: EmbedderName, args: argparse.Namespace,
                            datasets: Sequence[Dataset]) -> EmbedderResult:
    """Start the embedder's stack, ingest, evaluate every configuration, stop the stack."""
    # The wired defaults of the engine (what the API runs with) come from these settings.
    settings = bench_settings(f"quality-{embedder}", PORT_OFFSET, embedder)
    with bench_stack(settings, fresh=not args.reuse):
        services = await build_services(settings)
        try:
            info = await asyncio.to_thread(ingest, settings, services, datasets, args.reuse)
            with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
                while refresh_vocab(conn) is None:  # the worker's sweep does this in the pipeline
                    time.sleep(0.1)
            for ds in datasets:
                docs, parts, _ = counts(settings, ds.namespace)
                info[ds.name] = f"{docs} documents, {parts} parts ({info.get(ds.name, '')})"
            wired = services.engine
            wired_config = {"k": float(wired.config.candidate_k),
                            "rrf": float(wired.config.rrf_k),
                            "decay": wired.config.decay_lambda}
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
            for number, config in enumerate(configs):
                label = config_label(config) + (" (wired defaults)" if number == 0 else "")
                engine = RetrievalEngine(
                    wired.searcher, wired.reader, wired.result_sets, wired.catalog,
                    wired.embed_query,
                    EngineConfig(candidate_k=int(config["k"]), rrf_k=int(config["rrf"]),
                                 decay_lambda=config["decay"],
                                 evidence_n=wired.config.evidence_n))
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
            await services.close()


_ROW_TERMS = """
SELECT o.id, o.doc_len, array_agg(u.lexeme),
       array_agg(coalesce(array_length(u.positions, 1), 1))
FROM objects o CROSS JOIN LATERAL unnest(o.lexical) AS u
WHERE o.namespace_id = %(ns)s AND o.deleted_at IS NULL
  AND (o.parent_id IS NOT NULL OR NOT EXISTS (SELECT 1 FROM objects c WHERE c.parent_id = o.id
                                             AND c.deleted_at IS NULL))
GROUP BY o.id, o.doc_len
"""


async def formula_check(settings: Settings, engine: RetrievalEngine, ds: Dataset,
                        runs: ModeRuns) -> dict[str, float]:
    """Recompute our lexical channel's BM25 in Python from the stored tsvectors (the same
    lexemes, tf and lengths, Lucene IDF, k1=0.9, b=0.4) and compare its top k with the
    channel's: this checks the SQL formula itself, tokenization aside."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        rows = conn.execute(_ROW_TERMS, {"ns": ds.namespace}).fetchall()
    n = len(rows)
    avg = sum(int(r[1]) for r in rows) / n
    postings: dict[str, list[tuple[int, int]]] = {}
    for i, (_, _, lexemes, tfs) in enumerate(rows):
        for lex, tf in zip(lexemes, tfs, strict=True):
            postings.setdefault(lex, []).append((i, int(tf)))
    k = engine.config.candidate_k
    same, diffs = 0, []
    searcher = engine.searcher
    assert isinstance(searcher, PgPartSearcher)
    k1, b = searcher.params.k1, searcher.params.b
    for qid, text in ds.queries.items():
        lexemes = await searcher.query_lexemes(engine._query_text(text))
        scores: dict[int, float] = {}
        for lex in lexemes:
            plist = postings.get(lex, [])
            if not plist:
                continue
            weight = math.log(1.0 + (n - len(plist) + 0.5) / (len(plist) + 0.5))
            for i, tf in plist:
                norm = 1.0 - b + b * int(rows[i][1]) / avg
                scores[i] = scores.get(i, 0.0) + weight * tf * (k1 + 1) / (tf + k1 * norm)
        top = sorted(scores.items(), key=lambda item: (-item[1], str(rows[item[0]][0])))[:k]
        ours = runs.lexical_parts[qid]
        same += [rows[i][0] for i, _ in top] == [h.id for h in ours]
        mine = {rows[i][0]: sc for i, sc in top}
        diffs += [abs(mine[h.id] - h.score) for h in ours if h.id in mine]
    return {f"formula check: queries whose top {k} equals a Python BM25 on the stored "
            "lexemes (fraction)": same / len(ds.queries),
            "formula check: max |score difference| on shared hits":
                max(diffs) if diffs else float("nan")}


def lexical_agreement(ds: Dataset, runs: ModeRuns, ref: Reference) -> dict[str, float]:
    """How closely our lexical channel follows the reference BM25."""
    doc_overlap, part_overlap = [], []
    doc_pairs: list[tuple[list[float], list[float]]] = []
    part_pairs: list[tuple[list[float], list[float]]] = []
    for qid in ds.queries:
        ours = runs.runs["lexical"][qid]
        doc_overlap.append(len(set(ours[:10]) & set(ref.doc_runs[qid][:10])) / 10)
        scores = ref.doc_scores[qid]
        doc_pairs.append(([-i for i in range(len(ours))], [scores.get(d, 0.0) for d in ours]))
        hits = runs.lexical_parts[qid]
        part_overlap.append(len({h.id for h in hits[:10]} & set(ref.part_top[qid])) / 10)
        pscores = ref.part_scores[qid]
        part_pairs.append(([h.score for h in hits], [pscores.get(h.id, 0.0) for h in hits]))
    return {"doc overlap@10 (lexical mode vs rank_bm25 on docs)": float(np.mean(doc_overlap)),
            "doc Spearman (our order vs rank_bm25 scores, our top 100)":
                mean_spearman(doc_pairs),
            "part overlap@10 (lexical channel vs Lucene-IDF BM25 on parts)":
                float(np.mean(part_overlap)),
            "part Spearman (our BM25 vs reference, our top 50 parts)":
                mean_spearman(part_pairs)}


# -- report ----------------------------------------------------------------------------------


def report(results: list[EmbedderResult], datasets: Sequence[Dataset],
           args: argparse.Namespace, total_s: float) -> str:
    """The Markdown report."""
    scifact = next(d for d in datasets if d.name == "scifact")
    lines = ["### Retrieval quality (bench/quality.py)", "", *machine_lines(),
             f"- command: `python bench/quality.py {' '.join(args.argv)}`".rstrip(),
             f"- SciFact: BEIR corpus (5,183 abstracts), **train** split, "
             f"{len(scifact.queries)} queries"
             + ("" if len(scifact.queries) == 809 else " (evenly spaced over the ids)")
             + "; HotpotQA: hotpotqa_train100 (994 passages, 100 questions, 2 gold each)",
             f"- total wall time: {total_s / 60:.1f} min", ""]
    for res in results:
        lines += [f"#### Embedder: {res.embedder}", ""]
        lines += [f"- {name}: {value}" for name, value in res.ingest.items()]
        lines.append("")
        for label, rows in res.tables.items():
            header = ["mode"] + [f"{d.name} {m}" for d in datasets for m in metric_names(d)]
            body = [[mode] + [f"{vals.get(col, float('nan')):.3f}" for col in header[1:]]
                    for mode, vals in rows.items()]
            lines += [f"Engine: {label}", "", md_table(header, body), ""]
        first = next(iter(res.tables.values()))
        if "scifact nDCG@10" in first.get("hybrid", {}):
            hyb = first["hybrid"]["scifact nDCG@10"]
            lex = first["lexical"]["scifact nDCG@10"]
            den = first["dense"]["scifact nDCG@10"]
            verdict = "PASS" if hyb > max(lex, den) and hyb >= TARGET_NDCG else "FAIL"
            lines += [f"Target (wired defaults; hybrid > both single channels and nDCG@10 >= "
                      f"{TARGET_NDCG}): hybrid {hyb:.3f}, lexical {lex:.3f}, dense {den:.3f} "
                      f"-> **{verdict}**" + ("" if res.embedder == "minilm" else
                                             " (the target is for MiniLM)"), ""]
        for ds_name, measures in res.agreement.items():
            lines += [f"Lexical channel vs reference BM25, {ds_name} (wired defaults):", "",
                      md_table(["measure", "value"],
                               [[m, f"{v:.3f}"] for m, v in measures.items()]), ""]
        lines += ["Seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in res.seconds.items()), ""]
    return "\n".join(lines)


def main() -> None:
    """Parse arguments, run every embedder, print the Markdown report to stdout."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedders", default="minilm,static",
                        help="comma-separated: minilm, static (default both, MiniLM first)")
    parser.add_argument("--configs",
                        default="k=50,rrf=60,decay=0;k=100,rrf=60,decay=0;k=50,rrf=20,decay=0;"
                                "k=50,rrf=10,decay=0",
                        help="extra engine configurations after the wired defaults, "
                             "';'-separated k=candidate_k,rrf=rrf_k,decay=decay_lambda")
    parser.add_argument("--scifact-queries", type=int, default=None,
                        help="evaluate only the first N train queries (default: all 809)")
    parser.add_argument("--concurrency", type=int, default=4,
                        help="queries evaluated at once (quality only, not a latency figure)")
    parser.add_argument("--trigram-concurrency", type=int, default=2,
                        help="trigram channel calls at once while filling its cache")
    parser.add_argument("--verify", type=int, default=20,
                        help="queries per dataset also run through engine.search to check "
                             "that the hybrid mode is its answer")
    parser.add_argument("--reuse", action="store_true",
                        help="keep the stack's data from an earlier run and skip ingestion")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
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
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
