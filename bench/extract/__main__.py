"""Entity extraction throughput against the embedder's, and the heuristic's agreement with spaCy.

Parts are SciFact abstracts chunked as the write path chunks them (`chunk_text` with the
default settings). Each extractor reads a part's content, as the extraction stage does; each
embedder embeds the part's index text (title + chunk), as the embedding worker does, in batches
of `embed_batch_size`. One process, measured in interleaved rounds (heuristic, embedder,
heuristic, ...) and the median round kept, so load from other work on the machine hits both
alike. The static embedder is the baseline (ratio 1.00): the target is the heuristic at 3x its
parts/s or more, so extraction is never what ingestion waits for.

Agreement: spaCy's own entities (its NER, without the identifier and quote rules the spaCy
extractor adds) against the heuristic's spans, matched by overlap: precision is the share of
heuristic spans that overlap a spaCy entity, recall the share of spaCy entities that overlap a
heuristic span (also for name-like labels only). On SciFact and on HotpotQA's Wikipedia passages.

The "stage" rows (bench/extract/stage.py) run the whole extraction stage on a real stack of
their own against the embedding stage over the same rows: the issue's "extraction never the
ingest bottleneck" is their PASS/FAIL.

    python -m bench.extract [--parts 3000] [--spacy-parts 300] [--minilm-parts 64]
                            [--stage-docs 1500] [--out F]
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.extract.stage import stage_report, stage_rows
from bench.harness.runenv import (
    DATASETS,
    bench_parser,
    emit_report,
    log,
    machine_lines,
    quiet_logging,
)
from bench.ingest.corpus import load_corpus
from pipeline.domain.chunking import chunk_text
from pipeline.domain.index_text import part_index_text
from pipeline.domain.mentions import Mention, TextField
from pipeline.embedding.embedders import MiniLMEmbedder, StaticEmbedder
from pipeline.entities.extractors import MAX_MENTIONS_PER_ROW
from pipeline.entities.extractors.heuristic import HeuristicExtractor
from pipeline.entities.extractors.spacy_ import SpacyExtractor
from pipeline.settings import Settings

TARGET_RATIO = 3.0
NAME_LABELS = frozenset({"PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "PRODUCT", "EVENT",
                         "WORK_OF_ART", "LAW", "LANGUAGE"})
RULE_LABELS = frozenset({"IDENTIFIER", "QUOTED"})  # the heuristic rules the spaCy extractor adds


@dataclass(frozen=True)
class Part:
    content: str
    index_text: str


@dataclass
class Row:
    name: str
    parts: int
    per_second: float
    mentions_per_part: float | None
    per_cpu_second: float | None = None


def scifact_parts(settings: Settings, limit: int) -> list[Part]:
    out: list[Part] = []
    for doc in load_corpus():
        for chunk in chunk_text(doc.text, max_tokens=settings.chunk_max_tokens,
                                overlap_tokens=settings.chunk_overlap_tokens):
            out.append(Part(chunk.text, part_index_text(doc.title or None, chunk.text)))
            if len(out) == limit:
                return out
    return out


def hotpot_passages(limit: int) -> list[str]:
    path = DATASETS / "hotpotqa_train100" / "hotpotqa_train_corpus.json"
    corpus: dict[str, list[str]] = json.loads(Path(path).read_text(encoding="utf-8"))
    return ["".join(sentences) for sentences in list(corpus.values())[:limit]]


def rows_of(texts: Sequence[str]) -> list[list[TextField]]:
    return [[TextField("content", t)] for t in texts]


def timed(run: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process: every thread's)."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def interleaved(runs: dict[str, Callable[[], object]],
                rounds: int) -> dict[str, tuple[float, float]]:
    """The median (wall, CPU) seconds of each run over `rounds` rounds, runs alternating within
    a round."""
    seconds: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for i in range(rounds):
        for name, run in runs.items():
            seconds[name].append(timed(run))
        log(f"round {i + 1}/{rounds}: " + ", ".join(f"{n} {s[-1][0]:.2f} s"
                                                    for n, s in seconds.items()))
    return {name: (statistics.median(v[0] for v in values),
                   statistics.median(v[1] for v in values))
            for name, values in seconds.items()}


def overlaps(a: Mention, spans: Sequence[Mention]) -> bool:
    return any(a.start < b.end and b.start < a.end for b in spans)


def agreement(heuristic: list[list[Mention]], spacy: list[list[Mention]]) -> dict[str, float]:
    """Precision and recall of heuristic spans against spaCy's entities, by overlap."""
    h_total = h_hit = s_total = s_hit = n_total = n_hit = 0
    for hs, ss in zip(heuristic, spacy, strict=True):
        ss = [m for m in ss if m.label not in RULE_LABELS]
        h_total += len(hs)
        h_hit += sum(overlaps(m, ss) for m in hs)
        s_total += len(ss)
        s_hit += sum(overlaps(m, hs) for m in ss)
        names = [m for m in ss if m.label in NAME_LABELS]
        n_total += len(names)
        n_hit += sum(overlaps(m, hs) for m in names)
    return {"precision": h_hit / max(h_total, 1), "recall": s_hit / max(s_total, 1),
            "name recall": n_hit / max(n_total, 1), "heuristic": h_total / len(heuristic),
            "spacy": s_total / len(spacy)}


def main() -> None:
    parser = bench_parser(__doc__, "python -m bench.extract")
    parser.add_argument("--parts", type=int, default=3000, help="SciFact parts to time")
    parser.add_argument("--spacy-parts", type=int, default=300,
                        help="parts spaCy reads (it is slow) and agreement is measured on")
    parser.add_argument("--minilm-parts", type=int, default=64, help="0 skips MiniLM")
    parser.add_argument("--stage-docs", type=int, default=1500,
                        help="SciFact documents the stage rows ingest (0 skips them)")
    parser.add_argument("--stage-port-offset", type=int, default=1700,
                        help="ports of the stage rows' stack: defaults + this (and its own "
                             "data directory when not 1700), to run beside another one")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    quiet_logging()
    settings = Settings()
    parts = scifact_parts(settings, args.parts)
    contents = rows_of([p.content for p in parts])
    index_texts = [p.index_text for p in parts]
    batch = settings.embed_batch_size
    log(f"{len(parts)} SciFact parts, {sum(len(p.content) for p in parts) / len(parts):.0f} "
        "characters each on average")

    heuristic = HeuristicExtractor(max_mentions=MAX_MENTIONS_PER_ROW)
    static = StaticEmbedder()
    static.embed(index_texts[:batch])  # load the model outside the clock
    heuristic.extract(contents[:batch])

    def embed_all(embedder: StaticEmbedder | MiniLMEmbedder, texts: Sequence[str]) -> None:
        for i in range(0, len(texts), batch):
            embedder.embed(texts[i:i + batch])

    medians = interleaved({"heuristic": lambda: heuristic.extract(contents),
                           "static": lambda: embed_all(static, index_texts)}, args.rounds)
    h_out = heuristic.extract(contents)
    (s_wall, s_cpu), (h_wall, h_cpu) = medians["static"], medians["heuristic"]
    rows = [Row("static embedder (baseline)", len(parts), len(parts) / s_wall, None,
                len(parts) / s_cpu),
            Row("heuristic extractor", len(parts), len(parts) / h_wall,
                sum(len(e.mentions) for e in h_out) / len(parts), len(parts) / h_cpu)]

    spacy = SpacyExtractor(max_mentions=MAX_MENTIONS_PER_ROW)
    sp_rows = contents[:args.spacy_parts]
    spacy.extract(sp_rows[:8])
    log(f"spaCy on {len(sp_rows)} parts")
    start = time.perf_counter()
    sp_out = spacy.extract(sp_rows)
    rows.append(Row("spacy extractor", len(sp_rows), len(sp_rows) / (time.perf_counter() - start),
                    sum(len(e.mentions) for e in sp_out) / len(sp_rows)))

    if args.minilm_parts:
        minilm = MiniLMEmbedder()
        minilm.embed(index_texts[:2])
        log(f"MiniLM on {args.minilm_parts} parts")
        seconds, _ = timed(lambda: embed_all(minilm, index_texts[:args.minilm_parts]))
        rows.append(Row("minilm embedder", args.minilm_parts, args.minilm_parts / seconds, None))

    hotpot = rows_of(hotpot_passages(args.spacy_parts))
    log(f"agreement on {len(sp_rows)} SciFact parts and {len(hotpot)} HotpotQA passages")
    agree = {
        "SciFact parts": agreement([e.mentions for e in h_out[:len(sp_rows)]],
                                   [e.mentions for e in sp_out]),
        "HotpotQA passages": agreement([e.mentions for e in heuristic.extract(hotpot)],
                                       [e.mentions for e in spacy.extract(hotpot)]),
    }
    text = report(rows, agree, args.rounds)
    if args.stage_docs:
        text += "\n\n" + "\n".join(stage_report(*stage_rows(args.stage_docs,
                                                                port_offset=args.stage_port_offset)))
    emit_report(text, args.out)


def report(rows: list[Row], agree: dict[str, dict[str, float]], rounds: int) -> str:
    base = rows[0].per_second
    lines = ["# Entity extraction: throughput and agreement (bench/extract)", "",
             *machine_lines(), "",
             f"Throughput: parts per second, one process (heuristic and static: median of "
             f"{rounds} interleaved rounds); ratio against the static embedder. Parts per "
             "CPU-second counts every thread's CPU time: it holds still when other work "
             "loads the machine, and shows what the embedder's extra threads buy.", "",
             "| what | parts | parts/s | ratio | parts/CPU-s | ratio | mentions/part |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    cpu_base = rows[0].per_cpu_second or 1.0
    for r in rows:
        mentions = f"{r.mentions_per_part:.1f}" if r.mentions_per_part is not None else "-"
        cpu = (f"{r.per_cpu_second:,.0f} | {r.per_cpu_second / cpu_base:.2f}"
               if r.per_cpu_second is not None else "- | -")
        lines.append(f"| {r.name} | {r.parts} | {r.per_second:,.0f} | "
                     f"{r.per_second / base:.2f} | {cpu} | {mentions} |")
    ratio = rows[1].per_second / base
    verdict = "PASS" if ratio >= TARGET_RATIO else "FAIL"
    lines += ["", f"{verdict}: heuristic at {ratio:.1f}x the static embedder's parts/s "
              f"(target >= {TARGET_RATIO:.0f}x)", "",
              "Agreement of heuristic spans with spaCy's entities (overlap):", "",
              "| text | heuristic spans/part | spaCy entities/part | precision | recall | "
              "recall, name-like labels |", "|---|---:|---:|---:|---:|---:|"]
    for name, a in agree.items():
        lines.append(f"| {name} | {a['heuristic']:.1f} | {a['spacy']:.1f} | "
                     f"{a['precision']:.3f} | {a['recall']:.3f} | {a['name recall']:.3f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
