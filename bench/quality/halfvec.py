"""Does storing vectors as `halfvec` (IEEE half precision, half the bytes) keep retrieval quality?

The dense channel's ranking over SciFact (train queries, the whole corpus) with the stored
vectors as float32 (pgvector `vector`) and rounded to float16 (`halfvec`: pgvector converts a
halfvec to float32 and computes the same cosine, so rounding is the only difference), exact
cosine, a document scored by its best part, as the engine promotes parts. The passages are the
searchable rows the write path stores (the parts: parent title + chunk, chunked with the
defaults) and the queries are embedded as the API embeds them (kept float32: a query is never
stored). Reported: nDCG@10 and recall@100 per storage, their delta, and how many queries'
top 10 changed at all. One process, no stack: quality figures are deterministic.

`--passages` caps the passages per document and `--distractors` the documents no query judges
(all judged documents are kept): MiniLM embeds about 10 passages per CPU-second here, so on a
loaded machine `--passages 1 --distractors 1000` (about 2,000 passages) is what fits; the
figures are then those of that smaller corpus, for both storages alike.

Usage: python -m bench.quality.halfvec [--embedders static,minilm] [--passages N] [--queries N]
       [--distractors N]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import cast

import numpy as np

from bench.harness.runenv import machine, quiet_logging, say
from bench.quality.data import load_scifact
from bench.quality.ref import ndcg_at, recall_at
from pipeline.domain.chunking import chunk_text
from pipeline.domain.index_text import embedder_text, part_index_text
from pipeline.embedding.embedders import build_embedder
from pipeline.embedding.service import EMBED_TEXT_CAP_CHARS
from pipeline.embedding.settings import EmbedderName
from pipeline.settings import Settings

TARGET_NDCG_DELTA = 0.002  # adopt halfvec when nDCG@10 moves by less than this


def passages(docs: dict[str, tuple[str, str]], cap: int | None,
             settings: Settings) -> tuple[list[str], list[str]]:
    """(document key, text) of every stored part, as the embedding worker embeds them."""
    keys, texts = [], []
    for key, (title, text) in docs.items():
        chunks = chunk_text(text) or []
        for chunk in chunks[:cap]:
            keys.append(key)
            texts.append(embedder_text(part_index_text(title, chunk.text),
                                       cap_chars=EMBED_TEXT_CAP_CHARS))
    return keys, texts


def rankings(doc_keys: np.ndarray, vectors: np.ndarray, queries: np.ndarray, k: int
             ) -> list[list[str]]:
    """Per query, the top k documents by their best part's cosine (vectors are unit length)."""
    order_keys, inverse = np.unique(doc_keys, return_inverse=True)
    out = []
    for q in queries:
        scores = vectors @ q
        best = np.full(len(order_keys), -np.inf, dtype=np.float32)
        np.maximum.at(best, inverse, scores)
        top = np.argsort(-best, kind="stable")[:k]
        out.append([str(order_keys[i]) for i in top])
    return out


def measure(name: EmbedderName, cap: int | None, max_queries: int | None,
            distractors: int | None) -> list[str]:
    """The table rows of one embedder."""
    settings = Settings.model_validate({"embedder": name})
    dataset = load_scifact(max_queries)
    docs = dataset.docs
    if distractors is not None:
        judged = {d for rels in dataset.qrels.values() for d in rels}
        others = [k for k in docs if k not in judged][:distractors]
        docs = {k: v for k, v in docs.items() if k in judged or k in set(others)}
    keys, texts = passages(docs, cap, settings)
    embedder = build_embedder(settings)
    say(f"[{name}] embedding {len(texts)} passages and {len(dataset.queries)} queries")
    started = time.perf_counter()
    vectors = np.vstack([embedder.embed(texts[i:i + 256]) for i in range(0, len(texts), 256)])
    qids = list(dataset.queries)
    queries = embedder.embed([dataset.queries[q] for q in qids])
    say(f"[{name}]   embedded in {time.perf_counter() - started:.0f} s")
    doc_keys = np.asarray(keys)
    half = vectors.astype(np.float16).astype(np.float32)
    full_runs = rankings(doc_keys, vectors.astype(np.float32), queries, 100)
    half_runs = rankings(doc_keys, half, queries, 100)
    rows = []
    metrics = {}
    for label, runs in (("vector (float32)", full_runs), ("halfvec (float16)", half_runs)):
        ndcg = float(np.mean([ndcg_at(r, dataset.qrels[q], 10) for q, r in zip(qids, runs,
                                                                               strict=True)]))
        recall = float(np.mean([recall_at(r, dataset.qrels[q], 100)
                                for q, r in zip(qids, runs, strict=True)]))
        metrics[label] = ndcg
        rows.append(f"| {name} | {label} | {len(texts)} | {ndcg:.4f} | {recall:.4f} | | |")
    delta = metrics["halfvec (float16)"] - metrics["vector (float32)"]
    changed = sum(a[:10] != b[:10] for a, b in zip(full_runs, half_runs, strict=True))
    verdict = "PASS" if abs(delta) < TARGET_NDCG_DELTA else "FAIL"
    rows.append(f"| {name} | delta (halfvec - vector) | | {delta:+.4f} | | "
                f"{changed} of {len(qids)} | {verdict} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.quality.halfvec",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedders", default="static,minilm")
    parser.add_argument("--passages", type=int, default=None,
                        help="parts per document at most (default: all)")
    parser.add_argument("--queries", type=int, default=None,
                        help="train queries (default: all 809)")
    parser.add_argument("--distractors", type=int, default=None,
                        help="documents no query judges, at most (default: all)")
    args = parser.parse_args()
    quiet_logging()
    started = time.perf_counter()
    rows = []
    for name in args.embedders.split(","):
        rows += measure(cast(EmbedderName, name.strip()), args.passages, args.queries,
                        args.distractors)
    info = machine()
    print(f"## bench/quality/halfvec.py, {info['date']}\n")
    print(f"Command: python -m bench.quality.halfvec {' '.join(sys.argv[1:])} "
          f"(total {time.perf_counter() - started:.0f} s). SciFact train, dense channel alone, "
          "exact cosine, documents by their best part.\n")
    print("| embedder | storage | passages | nDCG@10 | R@100 | queries whose top 10 changed "
          f"| |nDCG delta| < {TARGET_NDCG_DELTA} |")
    print("|---|---|---:|---:|---:|---:|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
