"""Fusion alternatives for memory search, measured on one ingested LoCoMo namespace: each
question's channel candidates (BM25 and cosine over messages and summaries, deep lists with their
scores) are fetched once through the production searcher, then every fusion rule is applied to
the same lists in this process, so the table compares rules, not runs.

    python -m bench.memory --phases recall --fusion-table [--embedder minilm]
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.memory import data
from pipeline.domain.memory_values import MESSAGE, SUMMARY, MemoryScope
from pipeline.domain.read_model import Hit
from pipeline.retrieval.fusion import rrf

DEPTH = 100  # candidates fetched per channel; each rule takes its own depth from the top


@dataclass(frozen=True)
class Candidates:
    """One question's channel lists ("message_lexical", "summary_dense", ...)."""

    question: data.Question
    channels: dict[str, list[Hit]]


Rule = Callable[[Mapping[str, Sequence[Hit]]], list[uuid.UUID]]


async def collect(searcher: Any, embed: Any, ns: uuid.UUID, users: dict[str, dict[uuid.UUID, str]],
                  questions: list[data.Question]) -> list[Candidates]:
    """Every question's four channel lists, DEPTH deep."""
    out = []
    for q in questions:
        scope = MemoryScope(tuple(users[q.user_id]))
        vector = await embed(q.text)
        channels = {}
        for kind in (MESSAGE, SUMMARY):
            channels[f"{kind}_lexical"] = await searcher.lexical(ns, kind, scope, q.text, DEPTH)
            channels[f"{kind}_dense"] = await searcher.dense(ns, kind, scope, vector, DEPTH)
        out.append(Candidates(q, channels))
    return out


def _top(hits: Sequence[Hit], depth: int) -> list[Hit]:
    return list(hits[:depth])


def rrf_rule(k: int, dense_weight: float, depth: int) -> Rule:
    def rule(channels: Mapping[str, Sequence[Hit]]) -> list[uuid.UUID]:
        weights = {name: dense_weight if name.endswith("dense") else 1.0 for name in channels}
        return [f.id for f in rrf({n: _top(h, depth) for n, h in channels.items()}, k=k,
                                  weights=weights)]
    return rule


def _minmax(hits: Sequence[Hit]) -> dict[uuid.UUID, float]:
    if not hits:
        return {}
    scores = [h.score for h in hits]
    lo, hi = min(scores), max(scores)
    return {h.id: (h.score - lo) / (hi - lo) if hi > lo else 1.0 for h in hits}


def _over_top(hits: Sequence[Hit]) -> dict[uuid.UUID, float]:
    """Scores over the channel's best: no fitted floor, the best is 1."""
    if not hits or hits[0].score <= 0:
        return {}
    return {h.id: max(0.0, h.score) / hits[0].score for h in hits}


def score_rule(lexical_weight: float, depth: int, norm: str) -> Rule:
    normalise = _minmax if norm == "minmax" else _over_top

    def rule(channels: Mapping[str, Sequence[Hit]]) -> list[uuid.UUID]:
        total: dict[uuid.UUID, float] = {}
        for name, hits in channels.items():
            weight = lexical_weight if name.endswith("lexical") else 1.0 - lexical_weight
            for i, s in normalise(_top(hits, depth)).items():
                total[i] = total.get(i, 0.0) + weight * s
        return sorted(total, key=lambda i: (-total[i], str(i)))
    return rule


def rerank_rule(depth: int, lexical_weight: float) -> Rule:
    """Lexical's top `depth` (per kind), re-ordered by a mix of lexical (over its best) and the
    dense cosine of those same rows (over their best); rows dense alone found are not added."""
    def rule(channels: Mapping[str, Sequence[Hit]]) -> list[uuid.UUID]:
        total: dict[uuid.UUID, float] = {}
        for name, hits in channels.items():
            if not name.endswith("lexical"):
                continue
            lex = _over_top(_top(hits, depth))
            dense_all = {h.id: h.score for h in channels[name.replace("lexical", "dense")]}
            cos = {i: dense_all.get(i, 0.0) for i in lex}
            best = max(cos.values(), default=0.0)
            for i in lex:
                d = cos[i] / best if best > 0 else 0.0
                total[i] = lexical_weight * lex[i] + (1 - lexical_weight) * d
        return sorted(total, key=lambda i: (-total[i], str(i)))
    return rule


def rules() -> dict[str, Rule]:
    """The rules compared: RRF by k, dense weight and depth (k 60, weight 1, depth 40 is the
    previous default; k 10, weight 0.5, depth 40 the current one), score fusion (min-max or
    over-the-best normalised scores, lexical weight), and re-ranking lexical's candidates by a
    mix with their cosine."""
    out: dict[str, Rule] = {}
    for depth in (20, 40, 100):
        out[f"rrf k=60 d={depth}"] = rrf_rule(60, 1.0, depth)
    for k in (5, 10, 20, 60):
        for w in (0.3, 0.5, 0.7, 1.0):
            out[f"rrf k={k} dense x{w} d=40"] = rrf_rule(k, w, 40)
    for depth in (20, 40, 100):
        for lw in (0.5, 0.7, 0.9):
            out[f"score minmax lex {lw} d={depth}"] = score_rule(lw, depth, "minmax")
            out[f"score over-top lex {lw} d={depth}"] = score_rule(lw, depth, "top")
    for depth in (20, 40):
        for lw in (0.5, 0.7):
            out[f"rerank lex top{depth} lex {lw}"] = rerank_rule(depth, lw)
    return out


SCOPES = {"messages": ("message",), "both": ("message", "summary")}


def evaluate(cands: list[Candidates], dia: dict[uuid.UUID, set[str]]
             ) -> list[tuple[str, str, dict[str, float]]]:
    """Per scope and rule: recall@5/@10 over categories 1-4 and of category 5."""
    rows = []
    only = {"lexical": ("lexical",), "dense": ("dense",)}
    table: dict[str, Rule] = {f"{n} only": rrf_rule(60, 1.0, 100) for n in only}
    table.update(rules())
    for scope, kinds in SCOPES.items():
        for name, rule in table.items():
            sums: dict[str, list[float]] = {}
            for c in cands:
                chans = {n: h for n, h in c.channels.items() if n.split("_")[0] in kinds}
                for label, keep in only.items():
                    if name == f"{label} only":
                        chans = {n: h for n, h in chans.items() if n.endswith(keep[0])}
                ranked = rule(chans)[:10]
                retrieved = [dia.get(i, set()) for i in ranked]
                group = "5" if c.question.category == 5 else "1-4"
                for k in (5, 10):
                    sums.setdefault(f"{group}@{k}", []).append(
                        data.recall(retrieved, c.question.evidence, k))
            rows.append((scope, name, {k: sum(v) / len(v) for k, v in sums.items()}))
    return rows


def table_lines(rows: list[tuple[str, str, dict[str, float]]]) -> list[str]:
    lines = ["| scope | rule | 1-4 R@5 | 1-4 R@10 | cat 5 R@10 |", "|---|---|---|---|---|"]
    for scope, name, x in rows:
        lines.append(f"| {scope} | {name} | {x.get('1-4@5', 0):.3f} | {x.get('1-4@10', 0):.3f}"
                     f" | {x.get('5@10', 0):.3f} |")
    return lines
