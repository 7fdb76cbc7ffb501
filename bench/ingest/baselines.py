"""The two baselines the pipeline is compared with, on the same texts and the same stack.

- Embedder alone: the machine's limit for computing the index texts' vectors, with nothing else
  to do. Measured in spawned processes (one, and as many as the pipeline has embedding workers;
  for MiniLM also with one torch thread each), each embedding its share in batches of
  `embed_batch_size`, started together on a barrier.
- Naive loop: one document at a time, synchronously: chunk, embed the parent and its parts,
  insert the rows, upsert the graph node, commit. No broker, no workers, no outbox.
"""

from __future__ import annotations

import multiprocessing
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb

from bench.harness.processes import CpuMeter
from bench.ingest.corpus import KIND, Doc
from pipeline.domain.chunking import chunk_text, part_id
from pipeline.domain.index_text import (
    CONTENT_CAP_CHARS,
    entity_index_text,
    part_index_text,
    text_hash,
)
from pipeline.domain.projection import NodeState
from pipeline.embedding.embedders import build_embedder
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.settings import Settings


@dataclass(frozen=True)
class IndexTexts:
    """What the pipeline embeds for one document: the parent's text, then each part's."""

    parent: str
    parts: list[str]
    chunks: list[str]

    @property
    def all(self) -> list[str]:
        return [self.parent, *self.parts]


def index_texts(doc: Doc, settings: Settings) -> IndexTexts:
    """The texts exactly as the write path and the embedding worker build them."""
    chunks = chunk_text(doc.text, max_tokens=settings.chunk_max_tokens,
                        overlap_tokens=settings.chunk_overlap_tokens) if doc.text.strip() else []
    title = doc.title or None
    parent = entity_index_text(title, None, {}, doc.text,
                               content_cap_chars=CONTENT_CAP_CHARS)
    return IndexTexts(parent, [part_index_text(title, c.text) for c in chunks],
                      [c.text for c in chunks])


# -- embedder alone -------------------------------------------------------------------------


@dataclass(frozen=True)
class EmbedRate:
    """Passages embedded per second by `processes` processes working at once; `threads` is
    torch's per-process thread count (None: the default, as the workers build the embedder)."""

    processes: int
    threads: int | None
    passages: int
    seconds: float
    cpu_seconds: float

    @property
    def passages_per_s(self) -> float:
        return self.passages / self.seconds

    @property
    def cpu_ms_per_passage(self) -> float:
        return 1000 * self.cpu_seconds / self.passages

    @property
    def label(self) -> str:
        threads = "" if self.threads is None else f" x {self.threads} thread"
        return f"{self.processes} proc{threads}"


def pooled(runs: Sequence[EmbedRate]) -> EmbedRate:
    """Runs of one configuration taken as one: their passages, seconds and CPU summed."""
    first = runs[0]
    return EmbedRate(first.processes, first.threads, sum(r.passages for r in runs),
                     sum(r.seconds for r in runs), sum(r.cpu_seconds for r in runs))


def batches(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _embed_share(settings: Settings, threads: int | None, texts: Sequence[str], barrier: Any,
                 results: Any) -> None:
    """Child process: load and warm the embedder, wait for the others, embed, report the wall
    clock span and the CPU seconds (all threads) it took."""
    embedder = build_embedder(settings, num_threads=threads)
    embedder.embed(["warm up the model", "and its tokenizer"])
    barrier.wait()
    start, cpu = time.perf_counter(), time.process_time()
    for batch in batches(texts, settings.embed_batch_size):
        embedder.embed(batch)
    results.put((start, time.perf_counter(), time.process_time() - cpu))


def embedder_alone(settings: Settings, texts: Sequence[str], processes: int,
                   threads: int | None = None) -> EmbedRate:
    """Embed `texts` split round-robin over `processes` fresh processes (the embedder built as
    the workers build it, unless `threads` is given); the clock runs from the common start to
    the last end. Interleaving gives each process a similar mix of long and short texts.
    """
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(processes)
    results = ctx.Queue()
    children = [ctx.Process(target=_embed_share,
                            args=(settings, threads, list(texts[i::processes]), barrier, results))
                for i in range(processes)]
    for child in children:
        child.start()
    spans = [results.get(timeout=3600) for _ in children]
    for child in children:
        child.join()
        if child.exitcode != 0:
            raise RuntimeError(f"embedding process exited with status {child.exitcode}")
    seconds = max(end for _, end, _ in spans) - min(start for start, _, _ in spans)
    return EmbedRate(processes, threads, len(texts), seconds, sum(cpu for _, _, cpu in spans))


# -- naive synchronous loop -----------------------------------------------------------------

_INSERT = """
INSERT INTO objects (id, namespace_id, kind, title, content, parent_id, position,
                     index_text_hash, properties, event_id)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
"""

# The row's vector beside it (`object_embeddings`, whose row the insert's trigger made).
_STORE_VECTOR = """
UPDATE object_embeddings SET embedding = %s, embedded_hash = %s, embed_status = 'done'
WHERE id = %s
"""


@dataclass(frozen=True)
class NaiveRate:
    """Documents (and their parts) written one at a time by the naive loop; `cpu_seconds` is
    what every process (the loop's own, Postgres, FalkorDB, ...) spent meanwhile."""

    docs: int
    parts: int
    seconds: float
    cpu_seconds: float

    @property
    def docs_per_s(self) -> float:
        return self.docs / self.seconds

    @property
    def cpu_ms_per_doc(self) -> float:
        return 1000 * self.cpu_seconds / self.docs


def naive_loop(settings: Settings, docs: Sequence[Doc], namespace: uuid.UUID,
               meter: CpuMeter) -> NaiveRate:
    """For each document: chunk, embed (parent + parts), insert, write the graph, commit.

    `meter` covers the stack's servers and this process; it runs while the loop does.
    """
    embedder = build_embedder(settings)
    embedder.embed(["warm up the model"])
    graph = FalkorGraphWriter.from_settings(settings)
    parts = 0
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        register_vector(conn)
        meter.start()
        start = time.perf_counter()
        for doc in docs:
            texts = index_texts(doc, settings)
            vectors = embedder.embed(texts.all)
            oid = uuid.uuid5(namespace, f"naive:{doc.source_id}")
            title = doc.title or None
            parent_hash = text_hash(texts.parent)
            rows: list[tuple[Any, ...]] = [(oid, namespace, KIND, title, doc.text, None, None,
                                            parent_hash, Jsonb({}), "naive")]
            rows += [(part_id(namespace, oid, pos), namespace, KIND, None, chunk, oid, pos,
                      text_hash(text), Jsonb({}), "naive")
                     for pos, (chunk, text)
                     in enumerate(zip(texts.chunks, texts.parts, strict=True))]
            stored = [(vector, row[7], row[0]) for row, vector in zip(rows, vectors, strict=True)]
            with conn.transaction():
                with conn.cursor() as cur:
                    cur.executemany(_INSERT, rows)
                    cur.executemany(_STORE_VECTOR, stored)
                graph.upsert_nodes([NodeState(
                    id=str(oid), namespace=str(namespace), kind=KIND, title=title,
                    index_text=texts.parent, embedding=tuple(float(x) for x in vectors[0]),
                    embedded_hash=parent_hash, updated_at=time.strftime("%FT%T"))])
            parts += len(texts.parts)
        seconds = time.perf_counter() - start
        _, cpu = meter.stop()
    return NaiveRate(len(docs), parts, seconds, sum(cpu.values()))
