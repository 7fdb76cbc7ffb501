"""What the quality benchmark measures against: the metrics over the graded judgements, reference
BM25 on the same texts (rank_bm25), and how closely our lexical channel follows it (down to a
Python BM25 on the stored lexemes, to check the SQL formula itself).
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import psycopg
from rank_bm25 import BM25Okapi
from scipy.stats import spearmanr

from bench.quality.data import Dataset
from bench.quality.modes import PAGE, ModeRuns
from pipeline.domain.read_model import Hit, RowMeta
from pipeline.retrieval.engine import RetrievalEngine
from pipeline.retrieval.fusion import promote, rrf
from pipeline.retrieval.requests import query_text
from pipeline.retrieval.store.search import PgPartSearcher
from pipeline.settings import Settings

_WORD = re.compile(r"\w+")


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
    formula of our lexical channel (`pipeline.domain.bm25.idf`)."""

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
    meta = {pid: RowMeta(id=pid, parent_id=parent) for pid, parent, _ in parts}
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


# -- our lexical channel against the reference -----------------------------------------------


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
        lexemes = await searcher.query_lexemes(query_text(text))
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
