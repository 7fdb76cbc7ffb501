"""The embedding stage (MiniLM) against the model's bare encode of the same texts, one run.

1. A fresh stack (`.brainstream-bench/embedstage`, ports = defaults + 1850 +
   BRAINSTREAM_TEST_PORT_OFFSET, MiniLM's 384-dim columns); `--docs` SciFact documents applied
   in-process as the consumer applies them (`apply_batch`), so every row (documents and their
   parts) is pending.
2. Stage, former encode: `EmbeddingService` as the workers run it (claims of
   EMBED_BATCH_SIZE rows, load, embed, write back, outbox), with `MiniLMEmbedder(batch_size=64)`:
   the whole claim in one batch padded to its longest text, as before length buckets. One torch
   thread, as a worker. Timed from the first claim to the last commit.
3. The same documents again in a second namespace (new rows, so nothing is reused); bare encode
   #1; stage, shipped encode (`MiniLMEmbedder(num_threads=1)`, or `--encode-batch`); bare encode
   #2. A bare encode is the model alone on the texts the stage's embedder was given: all of them
   sorted by token length, through `SentenceTransformer.encode` in batches of ENCODE_BATCH; no
   database. The two bracket the shipped stage, and its ratio is against their mean time per text
   (the speed of a CPU-second drifts over minutes on a shared machine).

The target: the shipped stage processes rows at >= 0.95x the bare encode of the same texts
(rows/s, and for the record rows per CPU-second: this process and the Postgres server). The
bare encode is credited with the stage's rows, since it encodes exactly the texts they needed.
Padding is measured on the model's input: padded token slots / all token slots over every
forward pass of a run (a pre-hook reads each batch's attention mask).

Usage: python -m bench.ingest.embedstage [--docs N] [--encode-batch N] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness.inprocess import apply_events, bench_settings, bench_stack
from bench.harness.runenv import (
    code_version,
    emit_report,
    load_average,
    log,
    machine,
    quiet_logging,
)
from bench.ingest.corpus import cycle_docs, load_corpus, put_envelope
from bench.ingest.leanwrites import postgres_cpu
from pipeline.embedding.embedders.buckets import length_buckets
from pipeline.embedding.embedders.minilm import ENCODE_BATCH, MiniLMEmbedder, load_model
from pipeline.embedding.service import EmbeddingService
from pipeline.ports import Embedder, Vectors
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings

PORT_OFFSET = 1850
TARGET = 0.95
FORMER_BATCH = 64  # MiniLMEmbedder's former batch: with claims of 64, one batch per claim
NAMESPACES = {"former": uuid.UUID("6f1c2a3b-4d5e-4f60-8a71-92b3c4d5e6f1"),
              "shipped": uuid.UUID("6f1c2a3b-4d5e-4f60-8a71-92b3c4d5e6f2")}


class Recording:
    """An embedder that keeps the texts it was given (what the bare encode then encodes)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        """The inner embedder's vectors; `texts` recorded."""
        self.texts.extend(texts)
        return self.inner.embed(texts)


class PaddingMeter:
    """Token slots of every forward pass of the model, and how many of them are padding."""

    def __init__(self, model: Any) -> None:
        self.slots = 0
        self.real = 0
        model.register_forward_pre_hook(self._count)

    def _count(self, module: Any, args: tuple[Any, ...]) -> None:
        mask = args[0]["attention_mask"]
        self.slots += int(mask.numel())
        self.real += int(mask.sum())

    def take(self) -> float:
        """The padded fraction since the last call."""
        fraction = 1.0 - self.real / self.slots if self.slots else 0.0
        self.slots = self.real = 0
        return fraction


@dataclass
class Pass:
    name: str
    rows: int  # rows written back (a bare encode: its texts)
    texts: int  # texts the model encoded
    wall: float
    cpu: float  # this process, and for a stage the Postgres server
    server_cpu: float  # the Postgres server's part of `cpu`
    padding: float

    @property
    def wall_per_text(self) -> float:
        return self.wall / self.texts

    @property
    def cpu_per_text(self) -> float:
        return self.cpu / self.texts


def bare_encode(texts: Sequence[str], batch: int) -> None:
    """The model alone: `texts` sorted by token length, encoded in batches of `batch`."""
    model = load_model()
    ids = model.tokenizer(list(texts), truncation=True, max_length=model.max_seq_length,
                          return_attention_mask=False, return_token_type_ids=False)["input_ids"]
    for bucket in length_buckets([len(row) for row in ids], batch):
        model.encode([texts[i] for i in bucket], batch_size=len(bucket),
                     normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)


def _timed(run: Callable[[], object], server: Callable[[], float]
           ) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds of this process, CPU seconds of `server`)."""
    wall, cpu, before = time.perf_counter(), time.process_time(), server()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu, server() - before


def _ingest(settings: Settings, namespace: uuid.UUID, docs: int) -> None:
    events = [put_envelope(namespace, key, doc) for key, doc in cycle_docs(load_corpus(), docs)]
    log(f"applying {len(events)} SciFact documents")
    apply_events(settings, events)


def measure(docs: int, encode_batch: int, port_offset: int) -> tuple[list[Pass], Settings]:
    """Ingest, then the former stage, bare #1, the shipped stage, bare #2 (module docstring)."""
    settings = bench_settings("embedstage", port_offset, "minilm")
    former = MiniLMEmbedder(batch_size=FORMER_BATCH, num_threads=1)
    shipped = MiniLMEmbedder(batch_size=encode_batch, num_threads=1)
    for embedder in (former, shipped):  # loads the model, sets torch's threads
        embedder.embed(["warm the model up", "and its batches of two"])
    meter = PaddingMeter(load_model())
    meter.take()
    passes: list[Pass] = []
    with bench_stack(settings, fresh=True) as stack:
        postmaster = next(pid for service in stack.services if service.name == "postgres"
                          and (pid := service.running_pid()) is not None)
        pool = make_pool(settings, max_size=2, name="bench-embedstage")
        try:
            def stage(name: str, embedder: Embedder) -> Recording:
                recording = Recording(embedder)
                service = EmbeddingService(settings, pool, recording)
                rows = 0

                def run() -> None:
                    nonlocal rows
                    stats = service.run(max_batches=10**6)
                    if stats.failed:
                        raise RuntimeError(f"{stats.failed} rows failed to embed")
                    rows = stats.embedded

                log(f"stage: {name}")
                wall, own, server = _timed(run, lambda: postgres_cpu(postmaster))
                passes.append(Pass(name, rows, len(recording.texts), wall, own + server, server,
                                   meter.take()))
                return recording

            def bare(name: str, texts: list[str]) -> None:
                log(f"bare encode: {name}")
                wall, own, _ = _timed(lambda: bare_encode(texts, ENCODE_BATCH), lambda: 0.0)
                passes.append(Pass(name, len(texts), len(texts), wall, own, 0.0, meter.take()))

            _ingest(settings, NAMESPACES["former"], docs)
            first = stage(f"stage, former encode (claim in one batch of {FORMER_BATCH})", former)
            _ingest(settings, NAMESPACES["shipped"], docs)
            bare("bare encode #1", first.texts)
            second = stage(f"stage, shipped encode (token-sorted batches of {encode_batch})",
                           shipped)
            bare("bare encode #2", second.texts)
        finally:
            pool.close()
    return passes, settings


def report(passes: list[Pass], settings: Settings, *, command: str, load: tuple[str, str]
           ) -> str:
    """The Markdown report: each pass, the stages' ratios to the bare encode, the verdict."""
    former, bare1, shipped, bare2 = passes
    wall_per_text = (bare1.wall_per_text + bare2.wall_per_text) / 2
    cpu_per_text = (bare1.cpu_per_text + bare2.cpu_per_text) / 2

    def ratios(stage: Pass) -> tuple[float, float]:
        # the bare encode of this stage's texts, credited with its rows
        return (wall_per_text * stage.texts / stage.wall,
                cpu_per_text * stage.texts / stage.cpu)

    info = machine()
    lines = [f"## bench/ingest/embedstage.py, {info['date']}", "",
             f"Command: `{command}`; {info['cpus']} CPUs ({info['cpu model']}), code "
             f"{code_version()}, one torch thread, claims of {settings.embed_batch_size} rows; "
             f"1-min load average {load[0]} -> {load[1]}.", "",
             "| pass | rows | texts encoded | wall s | rows/s | CPU s (Postgres) | rows/CPU-s "
             "| padding |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for p in passes:
        lines.append(f"| {p.name} | {p.rows} | {p.texts} | {p.wall:.1f} | "
                     f"{p.rows / p.wall:.1f} | {p.cpu:.1f} ({p.server_cpu:.1f}) | "
                     f"{p.rows / p.cpu:.1f} | {p.padding:.1%} |")
    lines += ["", "Ratios to the bare encode of the same texts (its mean time per text over #1 "
              "and #2, credited with the stage's rows):", "",
              "| stage | rows/s ratio | rows/CPU-s ratio |", "|---|---:|---:|"]
    for stage in (former, shipped):
        wall, cpu = ratios(stage)
        lines.append(f"| {stage.name} | {wall:.2f} | {cpu:.2f} |")
    wall, cpu = ratios(shipped)
    verdict = "PASS" if wall >= TARGET else "FAIL"
    lines += ["", f"{verdict}: the shipped stage at {wall:.2f}x the bare encode's rows/s "
              f"(target >= {TARGET}x; {cpu:.2f}x in rows per CPU-second); "
              f"{shipped.rows / shipped.wall / (former.rows / former.wall):.2f}x the former "
              f"stage's rows/s; padding {former.padding:.1%} -> {shipped.padding:.1%} "
              f"(bare {bare2.padding:.1%})."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest.embedstage",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=300,
                        help="SciFact documents per stage (about 2.8 rows each)")
    parser.add_argument("--encode-batch", type=int, default=ENCODE_BATCH,
                        help="the shipped stage's batch (the bare encode keeps ENCODE_BATCH)")
    parser.add_argument("--port-offset", type=int, default=PORT_OFFSET + int(
        os.environ.get("BRAINSTREAM_TEST_PORT_OFFSET", "0")))
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    quiet_logging()
    start_load = load_average()
    passes, settings = measure(args.docs, args.encode_batch, args.port_offset)
    command = "python -m bench.ingest.embedstage " + " ".join(sys.argv[1:])
    emit_report(report(passes, settings, command=command.strip(),
                       load=(start_load, load_average())), args.out)


if __name__ == "__main__":
    main()
