"""What the quality benchmark measured for one embedder, and its Markdown report: a table per
engine configuration (modes and reference BM25 by dataset metric), the target, and the lexical
channel's agreement with the reference.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from bench.harness.inprocess import md_table
from bench.harness.runenv import machine_lines
from bench.quality.data import Dataset
from bench.quality.ref import metric_names

TARGET_NDCG = 0.70
TARGET_NDCG_13 = 0.72  # issue 13: quality rises while search gets faster


@dataclass
class EmbedderResult:
    """Everything measured for one embedder."""

    embedder: str
    ingest: dict[str, str]
    tables: dict[str, dict[str, dict[str, float]]]  # config -> row -> metric -> value
    agreement: dict[str, dict[str, float]]          # dataset -> measure -> value
    seconds: dict[str, float]


def report(results: list[EmbedderResult], datasets: Sequence[Dataset],
           args: argparse.Namespace, total_s: float) -> str:
    """The Markdown report."""
    scifact = next(d for d in datasets if d.name == "scifact")
    lines = ["### Retrieval quality (bench/quality)", "", *machine_lines(),
             f"- command: `python -m bench.quality {' '.join(args.argv)}`".rstrip(),
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
            lines += [f"Target of issue 13 (wired defaults, nDCG@10 >= {TARGET_NDCG_13}): "
                      f"hybrid {hyb:.4f} -> **{'PASS' if hyb >= TARGET_NDCG_13 else 'FAIL'}**"
                      + ("" if res.embedder == "minilm" else " (the target is for MiniLM)"), ""]
        for ds_name, measures in res.agreement.items():
            lines += [f"Lexical channel vs reference BM25, {ds_name} (wired defaults):", "",
                      md_table(["measure", "value"],
                               [[m, f"{v:.3f}"] for m, v in measures.items()]), ""]
        lines += ["Seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in res.seconds.items()), ""]
    return "\n".join(lines)
