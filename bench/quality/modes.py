"""The quality benchmark's evaluation through the engine: every query in every mode (each mode a
set of channels ranked and promoted by the engine itself), the trigram channel's answers cached
on disk, and the engine configurations to compare.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.harness.runenv import log
from bench.quality.data import Dataset
from pipeline.domain.read_model import Filters, Hit, SearchQuery
from pipeline.retrieval.engine import RetrievalEngine
from pipeline.retrieval.requests import query_text

MODES = ("lexical", "dense", "trigram", "lexical+dense", "hybrid")
# Not the engine: the same channel lists, each promoted to documents by its best part, then
# fused by RRF over documents (see `doc_level`), written a second time in the benchmark; the
# engine fuses the same way, so these rows must equal the corresponding modes (a cross-check).
WHAT_IF = ("check: lexical, best part", "check: dense, best part",
           "check: lexical+dense, doc-level RRF", "check: hybrid, doc-level RRF")
PAGE = 100  # the engine's max_results: recall@100 reads the first page of 100


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
                dataset.namespace, query_text(text), Filters(), (), cache.k)
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

    Each mode is the engine's own ranking (`rank_and_page`: RRF, promotion, hydration, decay,
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
    near = "fuzzy" if "fuzzy" in engine.channels else "trigram"

    async def near_spellings(qid: str, text: str) -> list[Hit]:
        """The engine's near-spelling channel: trigram (cached) on Postgres, fuzzy on Tantivy."""
        if "fuzzy" in engine.channels:
            return await engine.channels["fuzzy"].candidates(ns, text, no_filters, (), k)
        hits = cache.get(dataset.name, qid)
        assert hits is not None
        return hits[:k]

    async def one(number: int, qid: str, raw: str) -> None:
        text = query_text(raw)  # stripped, as search() does before every channel
        lexical = await engine.channels["lexical"].candidates(ns, text, no_filters, (), k)
        trigram = await near_spellings(qid, text)
        dense = await engine.searcher.search_dense(ns, await embed(text), no_filters, (), k)
        channels = {"lexical": {"lexical": lexical}, "dense": {"dense": dense},
                    "trigram": {near: trigram},
                    "lexical+dense": {"lexical": lexical, "dense": dense},
                    "hybrid": {name: hits for name, hits in
                               (("lexical", lexical), (near, trigram), ("dense", dense))
                               if name in engine.fused_channels}}
        for mode, chans in channels.items():
            page = await engine.rank_and_page(ns, text, chans, PAGE, None)
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


WEIGHT_KEYS = {"lex": ("lexical",), "near": ("trigram", "fuzzy"), "dense": ("dense",)}


def parse_configs(text: str) -> list[dict[str, float]]:
    """`k=50,rrf=60,decay=0.002;k=100,near=0.5,...` -> list of {k, rrf, decay, lex, near,
    dense}: the last three are channel weights in the fusion (`near` is the near-spelling
    channel, trigram or fuzzy)."""
    configs = []
    for chunk in text.split(";"):
        if not chunk.strip():
            continue
        values = {"k": 50.0, "rrf": 60.0, "decay": 0.0, "lex": 1.0, "near": 1.0, "dense": 1.0}
        for pair in chunk.split(","):
            name, value = pair.split("=")
            if name.strip() not in values:
                raise SystemExit(f"unknown config key {name!r} (k, rrf, decay, lex, near, dense)")
            values[name.strip()] = float(value)
        configs.append(values)
    return configs


def channel_weights(config: dict[str, float]) -> tuple[tuple[str, float], ...]:
    """The engine's `channel_weights` of a configuration (only those that are not 1)."""
    return tuple((name, config[key]) for key, names in WEIGHT_KEYS.items() for name in names
                 if config.get(key, 1.0) != 1.0)


def config_label(config: dict[str, float]) -> str:
    """A short label of an engine configuration."""
    weights = "".join(f", {key}={config[key]:g}" for key in WEIGHT_KEYS
                      if config.get(key, 1.0) != 1.0)
    return (f"candidate_k={int(config['k'])}, rrf_k={int(config['rrf'])}, "
            f"decay={config['decay']:g}{weights}")
