"""What the ingestion benchmark measured for one embedder, and its Markdown tables.

Every ratio is against a baseline measured in the same run on the same texts (`baselines.py`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from bench.harness.timing import percentile
from bench.ingest.baselines import EmbedRate, NaiveRate, pooled
from bench.ingest.flow import IDLE_TIMEOUT
from bench.ingest.writeamp import WriteCost, table_lines

# The targets: the pipeline against its baselines, and the static pipeline's whole cost per
# document (the entity layer included) in absolute terms, since its naive loop writes no entity
# layer to compare with
TARGET_MINILM_VS_EMBEDDER = 0.9
TARGET_STATIC_SETTLED_CPU_MS = 20.0  # CPU per document until settled, all processes, at most
TARGET_STATIC_VS_NAIVE = 1.5
TARGET_STATIC_CPU_VS_NAIVE = 1.3      # pipeline CPU per document / the naive loop's, at most
TARGET_MINILM_CPU_VS_EMBEDDER = 0.87  # embedder-alone CPU per passage / the pipeline's, at least
TARGET_P99_SECONDS = 5.0


@dataclass(frozen=True)
class Throughput:
    """N documents published at once: from the first publish to the last indexed.

    Rates count only documents that were announced as indexed (and their parts).
    """

    published: int
    docs: int
    parts: int
    all_parts: int
    seconds: float
    cpu_wall: float
    cpu: dict[str, float]
    load: tuple[str, str]
    writes: WriteCost
    distinct_texts: int  # of the published documents' texts, counted per document
    # After the last indexed: the last part extracted and everything settled (extraction, the
    # proposal pass, the outbox), in seconds from the first publish, and the CPU meter again
    # from the same start to the settled moment.
    extracted_after: float
    settled_after: float
    settled_cpu_wall: float
    settled_cpu: dict[str, float]

    @property
    def passages(self) -> int:
        """Texts embedded for the indexed documents: each one's own plus its parts'."""
        return self.docs + self.parts

    @property
    def lost(self) -> int:
        return self.published - self.docs

    @property
    def pipeline_cpu(self) -> float:
        """CPU seconds of the pipeline's processes and servers (not the benchmark's)."""
        return sum(v for k, v in self.cpu.items() if k != "bench")

    @property
    def settled_cpu_ms_per_doc(self) -> float:
        """`cpu_ms_per_doc` up to the moment nothing was left to extract, propose or project."""
        return 1000 * sum(v for k, v in self.settled_cpu.items() if k != "bench") / self.published

    @property
    def cpu_ms_per_doc(self) -> float:
        """Pipeline CPU per published document (lost ones were processed too)."""
        return 1000 * self.pipeline_cpu / self.published

    @property
    def cpu_ms_per_passage(self) -> float:
        return 1000 * self.pipeline_cpu / (self.published + self.all_parts)

    @property
    def cpu_ms_per_distinct_text(self) -> float:
        """The workers embed a text a document indexes twice (itself and its one part) once."""
        return 1000 * self.pipeline_cpu / self.distinct_texts


@dataclass(frozen=True)
class Latency:
    """Documents published on a steady schedule: publish-to-indexed seconds of each; a
    document never indexed counts as infinitely late."""

    target_rate: float
    publish_rate: float
    seconds: list[float]
    stages: dict[str, list[float]]
    load: tuple[str, str]
    cpu_wall: float  # seconds the CPU meter ran: from the first publish to the last indexed
    cpu: dict[str, float]  # CPU seconds per process over it

    @property
    def lost(self) -> int:
        return sum(1 for s in self.seconds if math.isinf(s))

    def percentile(self, q: float) -> float:
        return percentile(self.seconds, q)


@dataclass(frozen=True)
class Result:
    """Everything measured for one embedder."""

    embedder: str
    workers: int
    embed_runs: list[tuple[EmbedRate, EmbedRate]]  # per configuration: before and after
    baseline_docs: int
    naive: NaiveRate
    throughput: Throughput
    latency: Latency

    @property
    def docs_per_s(self) -> float:
        return self.throughput.docs / self.throughput.seconds

    @property
    def parts_per_s(self) -> float:
        return self.throughput.parts / self.throughput.seconds

    @property
    def passages_per_s(self) -> float:
        return self.throughput.passages / self.throughput.seconds

    @property
    def embed_rates(self) -> list[EmbedRate]:
        """Each embedder-alone configuration, its runs before and after the pipeline pooled."""
        return [pooled(runs) for runs in self.embed_runs]

    @property
    def embed_best(self) -> EmbedRate:
        """The embedder-alone configuration that went fastest: the machine's limit."""
        return max(self.embed_rates, key=lambda r: r.passages_per_s)

    def embed_docs_per_s(self, rate: EmbedRate) -> float:
        """An embedder-alone rate in documents/s of the throughput set's passage mix."""
        return rate.passages_per_s * self.throughput.docs / self.throughput.passages


def verdict(ok: bool) -> str:
    """PASS or FAIL."""
    return "PASS" if ok else "FAIL"


def seconds_text(value: float) -> str:
    """A latency for the table; infinity means the document was never indexed."""
    return "never (lost)" if math.isinf(value) else f"{value:.2f} s"


def report(result: Result) -> str:
    """The result tables of one embedder, as Markdown."""
    r, t, lat = result, result.throughput, result.latency
    best = r.embed_best
    cheapest = min(r.embed_rates, key=lambda e: e.cpu_ms_per_passage)
    vs_embedder = r.passages_per_s / best.passages_per_s
    vs_naive = r.docs_per_s / r.naive.docs_per_s
    p99 = lat.percentile(99)
    minilm = r.embedder == "minilm"
    embedder_target = (f">= {TARGET_MINILM_VS_EMBEDDER} | "
                       f"{verdict(vs_embedder >= TARGET_MINILM_VS_EMBEDDER)}"
                       if minilm else "- | -")
    naive_target = (f">= {TARGET_STATIC_VS_NAIVE}x | "
                    f"{verdict(vs_naive >= TARGET_STATIC_VS_NAIVE)}" if not minilm else "- | -")
    cpu_vs_naive = t.cpu_ms_per_doc / r.naive.cpu_ms_per_doc
    cpu_naive_target = (f"<= {TARGET_STATIC_CPU_VS_NAIVE}x | "
                        f"{verdict(cpu_vs_naive <= TARGET_STATIC_CPU_VS_NAIVE)}"
                        if not minilm else "- | -")
    settled_target = (f"<= {TARGET_STATIC_SETTLED_CPU_MS:.0f} | "
                      f"{verdict(t.settled_cpu_ms_per_doc <= TARGET_STATIC_SETTLED_CPU_MS)}"
                      if not minilm else "- | -")
    cpu_vs_embedder = cheapest.cpu_ms_per_passage / t.cpu_ms_per_passage
    cpu_embedder_target = (f">= {TARGET_MINILM_CPU_VS_EMBEDDER} | "
                           f"{verdict(cpu_vs_embedder >= TARGET_MINILM_CPU_VS_EMBEDDER)}"
                           if minilm else "- | -")
    lines = [
        f"### {r.embedder}: {t.published} docs published, {r.workers} embedding workers",
        "",
        "| metric | value | baseline | ratio | target | result |",
        "|---|---:|---|---:|---|---|",
        f"| documents announced as indexed | {t.docs} of {t.published} | | | all | "
        f"{verdict(t.lost == 0)} |",
        f"| throughput, docs/s | {r.docs_per_s:.1f} | embedder alone ({best.label}) "
        f"{r.embed_docs_per_s(best):.1f} | {vs_embedder:.2f} | {embedder_target} |",
        f"| throughput, docs/s | {r.docs_per_s:.1f} | naive loop {r.naive.docs_per_s:.1f} | "
        f"{vs_naive:.2f}x | {naive_target} |",
        f"| throughput, parts/s | {r.parts_per_s:.1f} | | | | |",
        f"| throughput, passages embedded/s | {r.passages_per_s:.1f} | embedder alone "
        f"({best.label}) {best.passages_per_s:.1f} | {vs_embedder:.2f} | | |",
        f"| wall time, first publish to last indexed | {t.seconds:.1f} s | | | | |",
        f"| CPU per document, ms (all processes) | {t.cpu_ms_per_doc:.1f} | naive loop "
        f"{r.naive.cpu_ms_per_doc:.1f} | {cpu_vs_naive:.2f}x | {cpu_naive_target} |",
        f"| last part extracted, s from the first publish | {t.extracted_after:.1f} | "
        f"last indexed {t.seconds:.1f} | {t.extracted_after / t.seconds:.2f} | - | - |",
        f"| everything settled (extraction, proposals, outbox), s | {t.settled_after:.1f} | "
        f"last indexed {t.seconds:.1f} | {t.settled_after / t.seconds:.2f} | - | - |",
        f"| CPU per document until settled, ms | {t.settled_cpu_ms_per_doc:.1f} | naive loop "
        f"{r.naive.cpu_ms_per_doc:.1f} | "
        f"{t.settled_cpu_ms_per_doc / r.naive.cpu_ms_per_doc:.2f}x | {settled_target} |",
        f"| CPU per passage, ms (all processes) | {t.cpu_ms_per_passage:.2f} | embedder alone "
        f"({cheapest.label}) {cheapest.cpu_ms_per_passage:.2f} | "
        f"{cpu_vs_embedder:.2f} | {cpu_embedder_target} |",
        f"| CPU per distinct text, ms ({t.distinct_texts} of {t.published + t.all_parts} "
        f"passages) | {t.cpu_ms_per_distinct_text:.2f} | embedder alone ({cheapest.label}) "
        f"{cheapest.cpu_ms_per_passage:.2f} | "
        f"{cheapest.cpu_ms_per_passage / t.cpu_ms_per_distinct_text:.2f} | - | - |",
        f"| latency p50 at {lat.publish_rate:.1f} docs/s ({len(lat.seconds)} docs, "
        f"{lat.lost} lost) | {seconds_text(lat.percentile(50))} | | | | |",
        f"| latency p95 | {seconds_text(lat.percentile(95))} | | | | |",
        f"| latency p99 | {seconds_text(p99)} | | | < {TARGET_P99_SECONDS:.0f} s | "
        f"{verdict(p99 < TARGET_P99_SECONDS)} |",
        f"| latency max | {seconds_text(max(lat.seconds))} | | | | |",
        "",
        "| latency stage (half load) | p50 | p95 | p99 |",
        "|---|---:|---:|---:|",
        *(f"| {stage} | {percentile(v, 50):.2f} s | {percentile(v, 95):.2f} s | "
          f"{percentile(v, 99):.2f} s |" for stage, v in lat.stages.items() if v),
        "",
        "| baseline | docs | passages | seconds | passages/s | docs/s | CPU ms/passage | "
        "passages/s before / after the pipeline | CPU ms/passage before / after |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for (before, after), rate in zip(r.embed_runs, r.embed_rates, strict=True):
        lines.append(
            f"| embedder alone, {rate.label} | {r.baseline_docs} x 2 | {rate.passages} | "
            f"{rate.seconds:.1f} | {rate.passages_per_s:.1f} | {r.embed_docs_per_s(rate):.1f} "
            f"| {rate.cpu_ms_per_passage:.2f} | {before.passages_per_s:.1f} / "
            f"{after.passages_per_s:.1f} | {before.cpu_ms_per_passage:.2f} / "
            f"{after.cpu_ms_per_passage:.2f} |")
    naive_passages = r.naive.docs + r.naive.parts
    lines.append(f"| naive loop | {r.naive.docs} | {naive_passages} | {r.naive.seconds:.1f} | "
                 f"{naive_passages / r.naive.seconds:.1f} | {r.naive.docs_per_s:.1f} | "
                 f"{1000 * r.naive.cpu_seconds / naive_passages:.2f} | | |")
    busy = sorted(((v, k) for k, v in t.cpu.items() if v >= 0.05), reverse=True)
    waited = f"; includes {IDLE_TIMEOUT:.0f} s waiting for the lost documents" if t.lost else ""
    lines += ["", f"CPU seconds used during the throughput phase ({t.cpu_wall:.1f} s wall x "
              f"{os.cpu_count()} cores = {t.cpu_wall * (os.cpu_count() or 1):.0f} available"
              f"{waited}): "
              + ", ".join(f"{name} {value:.1f}" for value, name in busy) + ". "
              f"1-min load average: throughput {t.load[0]} -> {t.load[1]}, "
              f"latency {lat.load[0]} -> {lat.load[1]}.",
              "", f"CPU seconds from the first publish until settled ({t.settled_cpu_wall:.1f} s "
              f"wall; the last part extracted at {t.extracted_after:.1f} s): "
              + ", ".join(f"{name} {value:.1f}" for value, name
                          in sorted(((v, k) for k, v in t.settled_cpu.items() if v >= 0.05),
                                    reverse=True)) + ".",
              "", f"CPU seconds used during the latency phase ({lat.cpu_wall:.1f} s wall x "
              f"{os.cpu_count()} cores = {lat.cpu_wall * (os.cpu_count() or 1):.0f} available): "
              + ", ".join(f"{name} {value:.1f}" for value, name
                          in sorted(((v, k) for k, v in lat.cpu.items() if v >= 0.05),
                                    reverse=True)) + "."]
    lines += ["", f"Write amplification of the throughput phase ({t.published} docs, "
              f"{t.all_parts} parts; bench/ingest/writeamp.py):", "", *table_lines(t.writes,
                                                                          t.published)]
    return "\n".join(lines)
