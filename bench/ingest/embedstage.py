"""The embedding stage (MiniLM) against the model's bare encode of the same texts, one run.

1. A fresh stack (`.brainstream-bench/embedstage`, ports = defaults + 1850 +
   BRAINSTREAM_TEST_PORT_OFFSET, MiniLM's 384-dim columns); `--docs` SciFact documents applied
   in-process as the consumer applies them (`apply_batch`) into each of two namespaces, so every
   row (documents and their parts) is pending twice, under different ids (nothing is reused).
2. In rounds until nothing is pending, each stage `--round-claims` claims at a time, with the
   documents' roots as the workers' tasks pass them:
   - the stage with the former encode: `EmbeddingService` as the workers run it (claims of
     EMBED_BATCH_SIZE rows, load, embed, write back, outbox) with the embedder's former call,
     `SentenceTransformer.encode(texts, batch_size=64)`: the whole claim in one batch padded
     to its longest text (`FormerEncode`);
   - the bare encode of the texts its embedder was just given: the model alone, those texts
     sorted by token length through `SentenceTransformer.encode` in the embedder's length
     buckets (at most ENCODE_BATCH texts), no database;
   - the stage with the shipped encode (`MiniLMEmbedder`, or `--encode-batch`) on the second
     namespace's rows, then the bare encode of its texts.
   One torch thread throughout, as a worker. Interleaving in rounds of seconds gives each stage
   and its bare encode the same share of a loaded machine; whole passes minutes apart did not
   (a ratio moved by 0.5 between two runs at load 4-6).
3. Each stage is timed from claim to commit, in rows/s and rows per CPU-second (this process and
   the Postgres server); its bare encode, which encodes exactly the texts its rows needed, is
   credited with the same rows.

The target: the shipped stage processes rows at >= 0.95x its bare encode (rows/s; rows per
CPU-second shown beside). Padding is measured on the model's input: padded token slots / all
token slots over every forward pass of a stage or bare encode (a pre-hook reads each batch's
attention mask).

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

import numpy as np
from psycopg_pool import ConnectionPool

from bench.harness.inprocess import apply_events, bench_settings, bench_stack
from bench.harness.runenv import (
    code_version,
    emit_report,
    load_average,
    log,
    machine,
    quiet_logging,
)
from bench.ingest.corpus import cycle_docs, load_corpus, object_id, put_envelope
from bench.ingest.leanwrites import postgres_cpu
from pipeline.embedding.embedders.buckets import length_buckets
from pipeline.embedding.embedders.minilm import (
    ENCODE_BATCH,
    ENCODE_CALL_TOKENS,
    MINILM_DIM,
    MiniLMEmbedder,
    load_model,
)
from pipeline.embedding.service import EmbeddingService
from pipeline.ports import Embedder, Vectors
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings

PORT_OFFSET = 1850
TARGET = 0.95
FORMER_BATCH = 64  # MiniLMEmbedder's former batch: with claims of 64, one batch per claim
NAMESPACES = {"former": uuid.UUID("6f1c2a3b-4d5e-4f60-8a71-92b3c4d5e6f1"),
              "shipped": uuid.UUID("6f1c2a3b-4d5e-4f60-8a71-92b3c4d5e6f2")}


class FormerEncode:
    """MiniLMEmbedder's former call: sentence-transformers' own sort (by characters) and batches
    of FORMER_BATCH, so a claim of 64 rows is one batch padded to its longest text."""

    name = "minilm"
    dim = MINILM_DIM

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Normalized vectors of `texts`, in order."""
        out = load_model().encode(list(texts), batch_size=FORMER_BATCH, normalize_embeddings=True,
                                  convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)


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
    """Token slots of every forward pass of the model, and how many of them are real tokens."""

    def __init__(self, model: Any) -> None:
        self.slots = 0
        self.real = 0
        model.register_forward_pre_hook(self._count)

    def _count(self, module: Any, args: tuple[Any, ...]) -> None:
        mask = args[0]["attention_mask"]
        self.slots += int(mask.numel())
        self.real += int(mask.sum())


@dataclass
class Pass:
    name: str
    rows: int = 0  # rows written back (a bare encode: those of its stage)
    texts: int = 0  # texts the model encoded
    wall: float = 0.0
    cpu: float = 0.0  # this process, and for a stage the Postgres server
    server_cpu: float = 0.0  # the Postgres server's part of `cpu`
    slots: int = 0  # token slots of its forward passes
    real: int = 0  # of which real tokens

    @property
    def padding(self) -> float:
        return 1.0 - self.real / self.slots if self.slots else 0.0


def bare_encode(texts: Sequence[str], batch: int) -> None:
    """The model alone: `texts` sorted by token length, encoded in batches of `batch`."""
    model = load_model()
    ids = model.tokenizer(list(texts), truncation=True, max_length=model.max_seq_length,
                          return_attention_mask=False, return_token_type_ids=False)["input_ids"]
    for bucket in length_buckets([len(row) for row in ids], batch, call_cost=ENCODE_CALL_TOKENS):
        model.encode([texts[i] for i in bucket], batch_size=len(bucket),
                     normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)


def _timed(run: Callable[[], object], server: Callable[[], float]
           ) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds of this process, CPU seconds of `server`)."""
    wall, cpu, before = time.perf_counter(), time.process_time(), server()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu, server() - before


def _ingest(settings: Settings, namespace: uuid.UUID, docs: int) -> list[uuid.UUID]:
    """Apply `docs` SciFact documents in `namespace`; their ids (the roots of their rows)."""
    keyed = cycle_docs(load_corpus(), docs)
    log(f"applying {len(keyed)} SciFact documents")
    apply_events(settings, [put_envelope(namespace, key, doc) for key, doc in keyed])
    return [object_id(namespace, key) for key, _ in keyed]


class Runner:
    """One stage and its bare encode, run a round at a time."""

    def __init__(self, settings: Settings, pool: ConnectionPool, embedder: Embedder,
                 roots: list[uuid.UUID], meter: PaddingMeter, postmaster: int, name: str,
                 bare_batch: int) -> None:
        self.recording = Recording(embedder)
        self.service = EmbeddingService(settings, pool, self.recording)
        self.roots = roots
        self.meter = meter
        self.postmaster = postmaster
        self.bare_batch = bare_batch
        self.stage = Pass(name)
        self.bare = Pass(f"bare encode of the same texts (buckets of at most {bare_batch})")

    def round(self, claims: int) -> bool:
        """Embed up to `claims` claims of pending rows, then bare-encode their texts; False
        when nothing was pending."""
        embedded = 0

        def run() -> None:
            nonlocal embedded
            stats = self.service.run(self.roots, max_batches=claims)
            if stats.failed:
                raise RuntimeError(f"{stats.failed} rows failed to embed")
            embedded = stats.embedded

        self.recording.texts.clear()
        wall, own, server = _timed(run, lambda: postgres_cpu(self.postmaster))
        if not embedded:
            return False
        texts = list(self.recording.texts)
        self._add(self.stage, embedded, len(texts), wall, own, server)
        wall, own, _ = _timed(lambda: bare_encode(texts, self.bare_batch), lambda: 0.0)
        self._add(self.bare, embedded, len(texts), wall, own, 0.0)
        return True

    def _add(self, into: Pass, rows: int, texts: int, wall: float, own: float,
             server: float) -> None:
        into.rows += rows
        into.texts += texts
        into.wall += wall
        into.cpu += own + server
        into.server_cpu += server
        into.slots += self.meter.slots
        into.real += self.meter.real
        self.meter.slots = self.meter.real = 0


def measure(docs: int, encode_batch: int, round_claims: int, port_offset: int
            ) -> tuple[list[Pass], Settings]:
    """Ingest twice, then the two stages and their bare encodes in rounds (module docstring)."""
    settings = bench_settings("embedstage", port_offset, "minilm")
    shipped = MiniLMEmbedder(batch_size=encode_batch, num_threads=1)
    former = FormerEncode()
    for embedder in (shipped, former):  # the first loads the model and sets torch's threads
        embedder.embed(["warm the model up", "and its batches of two"])
    meter = PaddingMeter(load_model())
    with bench_stack(settings, fresh=True) as stack:
        postmaster = next(pid for service in stack.services if service.name == "postgres"
                          and (pid := service.running_pid()) is not None)
        pool = make_pool(settings, max_size=2, name="bench-embedstage")
        try:
            runners = [
                Runner(settings, pool, embedder, _ingest(settings, NAMESPACES[key], docs),
                       meter, postmaster, name, ENCODE_BATCH)
                for key, embedder, name in (
                    ("former", former,
                     f"stage, former encode (a claim in one batch of {FORMER_BATCH})"),
                    ("shipped", shipped,
                     f"stage, shipped encode (length buckets of at most {encode_batch})"))]
            meter.slots = meter.real = 0
            busy = True
            while busy:
                busy = False
                for runner in runners:
                    busy = runner.round(round_claims) or busy
                done = sum(r.stage.rows for r in runners)
                log(f"rows embedded: {done} of both stages")
        finally:
            pool.close()
    return [p for r in runners for p in (r.stage, r.bare)], settings


def report(passes: list[Pass], settings: Settings, *, command: str, load: tuple[str, str]
           ) -> str:
    """The Markdown report: each pass, each stage's ratios to its bare encode, the verdict."""
    former, former_bare, shipped, shipped_bare = passes
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
    lines += ["", "| stage / its bare encode | rows/s | rows/CPU-s |", "|---|---:|---:|"]
    for stage, bare in ((former, former_bare), (shipped, shipped_bare)):
        lines.append(f"| {stage.name} | {bare.wall / stage.wall:.2f} | "
                     f"{bare.cpu / stage.cpu:.2f} |")
    wall, cpu = shipped_bare.wall / shipped.wall, shipped_bare.cpu / shipped.cpu
    verdict = "PASS" if wall >= TARGET else "FAIL"
    lines += ["", f"{verdict}: the shipped stage at {wall:.2f}x its bare encode's rows/s "
              f"(target >= {TARGET}x; {cpu:.2f}x in rows per CPU-second); "
              f"{(shipped.rows / shipped.wall) / (former.rows / former.wall):.2f}x the former "
              f"stage's rows/s ({(shipped.rows / shipped.cpu) / (former.rows / former.cpu):.2f}x "
              f"per CPU-second); padding {former.padding:.1%} -> {shipped.padding:.1%} "
              f"(bare encode {shipped_bare.padding:.1%})."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest.embedstage",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=300,
                        help="SciFact documents per stage (about 2.8 rows each)")
    parser.add_argument("--encode-batch", type=int, default=ENCODE_BATCH,
                        help="the shipped stage's batch (the bare encode keeps ENCODE_BATCH)")
    parser.add_argument("--round-claims", type=int, default=4,
                        help="claims of each stage per round (then its bare encode)")
    parser.add_argument("--port-offset", type=int, default=PORT_OFFSET + int(
        os.environ.get("BRAINSTREAM_TEST_PORT_OFFSET", "0")))
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    quiet_logging()
    start_load = load_average()
    passes, settings = measure(args.docs, args.encode_batch, args.round_claims,
                               args.port_offset)
    command = "python -m bench.ingest.embedstage " + " ".join(sys.argv[1:])
    emit_report(report(passes, settings, command=command.strip(),
                       load=(start_load, load_average())), args.out)


if __name__ == "__main__":
    main()
