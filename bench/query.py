"""Read-path latency and throughput at 10k and 100k parts, against bare-query floors.

The benchmark starts its own embedded stack (`.brainstream-bench/query`, ports = defaults +
1000, static embedder: embedding 100k parts with MiniLM takes hours on 2 cores), then for each
scale, cumulatively in one namespace:

1. builds SciFact-derived documents (sentences of the BEIR SciFact corpus shuffled into new
   documents with a fixed seed, unique titles), chunks them with the pipeline's chunker and
   embeds parents and parts with the static embedder, exactly the texts the write path embeds;
2. loads them with binary COPY into `objects` (the non-key indexes dropped before and rebuilt
   after from their own definitions, then VACUUM ANALYZE, as autovacuum would), adds `links`
   (each document cites 3 others) and projects everything into FalkorDB through the real
   `OutboxRelay` (node_sync / edge_sync outbox rows);
3. measures, with the engine built by `api.wiring.build_services` (in-process, asyncio,
   N workers on one queue): `search` (claims of SciFact), `find_exact` (document titles),
   `find_objects` (claims), and `expand` with `max_hops=2` (random documents), each at
   concurrency 1 and 8; and the floors on the same data and queries: one bare pgvector
   top-k (`ORDER BY embedding <=> v LIMIT k`, ef_search as the engine sets it) and one bare
   full-text top-k (`lexical @@ q ORDER BY ts_rank(lexical, q) DESC LIMIT k`, q = the OR of
   the query's lexemes, as the engine's BM25 matches);
4. optionally (`--http`), `search` and `expand` through the real API process (uvicorn) to show
   the HTTP overhead.

Targets: search p95 at 100k parts within 3x (dense floor p95 + full-text floor p95) and under
100 ms; 2-hop expand p95 under 20 ms.

Usage: python bench/query.py [--scales 10000,100000] [--requests 150] [--http] [--reuse]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import logging
import os
import random
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psycopg
from harness import child_env
from pgvector.psycopg import register_vector, register_vector_async
from psycopg.types.json import Jsonb
from readbench import (
    DATASETS,
    Timing,
    bench_settings,
    bench_stack,
    log,
    machine_lines,
    md_table,
    run_concurrent,
)

from api.wiring import Services, build_services
from pipeline.domain.chunking import chunk_text, count_tokens, part_id
from pipeline.domain.index_text import entity_index_text, part_index_text, text_hash
from pipeline.domain.read_model import ExpandQuery, Filters, SearchQuery
from pipeline.domain.settings import Settings
from pipeline.embedding.embedders.static import StaticEmbedder
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.ingest.batch import EDGE_SYNC, NODE_SYNC
from pipeline.kafka.io import KafkaChangeSink, make_producer
from pipeline.outbox.relay import OutboxRelay, backlog
from pipeline.retrieval import bm25
from pipeline.retrieval.engine import RetrievalEngine
from pipeline.stores.postgres.pool import make_pool
from pipeline.stores.postgres.search import PgPartSearcher

PORT_OFFSET = 1000
API_PORT = 9000  # the default 8000 + the offset
NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "brainstream-bench/query")
KIND = "doc"
SOURCE = "bench.query"
RELATIONS = ("cites", "related")
LINKS_PER_DOC = 3
TARGET_PARTS_PER_DOC = 5
SEED = 20240601
TARGET_SEARCH_MS = 100.0
TARGET_SEARCH_FLOOR_RATIO = 3.0
TARGET_EXPAND_MS = 20.0
_SENTENCE = re.compile(r"(?<=[.!?])\s+")

_COLUMNS = ("id", "namespace_id", "kind", "title", "content", "parent_id", "position", "chunked",
            "embedding", "index_text_hash", "embedded_hash", "embed_status", "event_id",
            "context_title")
_TYPES = ("uuid", "uuid", "text", "text", "text", "uuid", "int4", "bool", "vector", "text",
          "text", "text", "text", "text")


# -- synthetic corpus --------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceText:
    """The raw material: SciFact titles, sentences and claims."""

    titles: list[str]
    sentences: list[str]
    claims: list[str]


def load_source() -> SourceText:
    """SciFact's titles and abstract sentences, and its 1,109 claims (the query texts)."""
    titles, sentences = [], []
    with gzip.open(DATASETS / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                titles.append(str(row.get("title") or "untitled"))
                sentences += [s for s in _SENTENCE.split(str(row.get("text") or "")) if s]
    claims = []
    with open(DATASETS / "scifact" / "queries.jsonl", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                claims.append(str(json.loads(line)["text"]))
    return SourceText(titles, sentences, claims)


@dataclass
class Doc:
    """One synthetic document and its chunks."""

    id: uuid.UUID
    title: str
    content: str
    chunks: list[str]


def make_docs(source: SourceText, start: int, parts_wanted: int, rng: random.Random
              ) -> list[Doc]:
    """Documents numbered from `start` until they hold at least `parts_wanted` parts."""
    docs: list[Doc] = []
    parts = 0
    number = start
    budget = 170 * TARGET_PARTS_PER_DOC  # a 200-token chunk with 30 overlap adds ~170 tokens
    while parts < parts_wanted:
        picked: list[str] = []
        tokens = 0
        while tokens < budget:
            sentence = rng.choice(source.sentences)
            picked.append(sentence)
            tokens += count_tokens(sentence)
        content = " ".join(picked)
        title = f"{rng.choice(source.titles)} (#{number})"
        oid = uuid.uuid5(NAMESPACE, f"doc:{number}")
        chunks = [c.text for c in chunk_text(content)]
        docs.append(Doc(oid, title, content, chunks))
        parts += len(chunks)
        number += 1
    return docs


# -- loading -------------------------------------------------------------------------------------


def object_rows(docs: Sequence[Doc], embedder: StaticEmbedder, settings: Settings
                ) -> list[tuple[Any, ...]]:
    """COPY rows: parents then parts, embedded as the embedding worker would embed them."""
    parent_texts = [entity_index_text(d.title, None, {}, d.content,
                                      content_cap_chars=settings.content_cap_chars) for d in docs]
    part_texts = [part_index_text(d.title, c) for d in docs for c in d.chunks]
    vectors = embedder.embed(parent_texts + part_texts)
    rows: list[tuple[Any, ...]] = []
    for doc, text, vector in zip(docs, parent_texts, vectors, strict=False):
        h = text_hash(text)
        rows.append((doc.id, NAMESPACE, KIND, doc.title, doc.content, None, None, False,
                     vector, h, h, "done", f"{SOURCE}:{doc.id}", None))
    i = len(docs)
    for doc in docs:
        for position, chunk in enumerate(doc.chunks):
            h = text_hash(part_texts[i - len(docs)])
            rows.append((part_id(doc.id, position), NAMESPACE, KIND, None, chunk, doc.id,
                         position, True, vectors[i], h, h, "done", f"{SOURCE}:{doc.id}",
                         doc.title))
            i += 1
    return rows


def load_rows(settings: Settings, rows: Sequence[tuple[Any, ...]],
              links: Sequence[tuple[uuid.UUID, str, uuid.UUID]], new_parents: Sequence[uuid.UUID]
              ) -> dict[str, float]:
    """COPY objects (indexes dropped and rebuilt), links and outbox rows; VACUUM ANALYZE."""
    times: dict[str, float] = {}
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        register_vector(conn)
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
            " AND tablename = 'objects' AND indexname <> 'objects_pkey'").fetchall()
        started = time.perf_counter()
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        # The postings trigger would insert each row's postings one by one; they are rebuilt
        # in bulk below by the function the trigger uses (migration 0009), without the primary
        # key meanwhile (one index build after the insert is faster than keeping it up to date).
        conn.execute("ALTER TABLE objects DISABLE TRIGGER objects_postings_insert")
        with conn.cursor() as cur, cur.copy(
                f"COPY objects ({', '.join(_COLUMNS)}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(list(_TYPES))
            for row in rows:
                copy.write_row(row)
        times["copy objects"] = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        for _, definition in indexes:
            conn.execute(definition)
        times["rebuild indexes"] = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute("ALTER TABLE objects ENABLE TRIGGER objects_postings_insert")
        conn.execute("ALTER TABLE search_postings DROP CONSTRAINT search_postings_pkey")
        conn.execute("SELECT brainstream_rebuild_postings(%s)", (NAMESPACE,))
        conn.execute("ALTER TABLE search_postings ADD PRIMARY KEY (namespace_id, lexeme, row_id)"
                     " INCLUDE (tf, doc_len)")
        conn.execute("VACUUM (ANALYZE) search_postings")
        times["search postings"] = time.perf_counter() - started
        started = time.perf_counter()
        with conn.cursor() as cur, cur.copy(
                "COPY links (namespace_id, from_id, relation_type, to_id, meta)"
                " FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["uuid", "uuid", "text", "uuid", "jsonb"])
            for from_id, rel, to_id in links:
                copy.write_row((NAMESPACE, from_id, rel, to_id,
                                Jsonb({"note": f"{rel} link for the benchmark"})))
        with conn.cursor() as cur, cur.copy(
                "COPY outbox (namespace_id, aggregate_id, op, payload)"
                " FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["uuid", "uuid", "text", "jsonb"])
            for pid in new_parents:
                copy.write_row((NAMESPACE, pid, NODE_SYNC, Jsonb({})))
            for from_id, rel, to_id in links:
                copy.write_row((NAMESPACE, from_id, EDGE_SYNC, Jsonb(
                    {"from": str(from_id), "relation_type": rel, "to": str(to_id)})))
        conn.execute("VACUUM (ANALYZE) objects")
        conn.execute("VACUUM (ANALYZE) links")
        times["links, outbox, vacuum"] = time.perf_counter() - started
        started = time.perf_counter()
        # the COPY bypassed the trigger that queues rows for the vocabulary: fill it directly
        conn.execute("INSERT INTO search_vocab (namespace_id, lexeme)"
                     " SELECT DISTINCT o.namespace_id, l FROM objects o,"
                     " unnest(tsvector_to_array(o.lexical)) AS l WHERE o.namespace_id = %s"
                     " ORDER BY 1, 2 ON CONFLICT DO NOTHING", (NAMESPACE,))
        times["search vocabulary"] = time.perf_counter() - started
    return times


def relay_all(settings: Settings) -> float:
    """Drain the outbox into FalkorDB with the real relay; seconds taken."""
    pool = make_pool(settings, max_size=2)
    producer = make_producer(settings, enable_idempotence=False)
    try:
        relay = OutboxRelay(settings, pool, FalkorGraphWriter.from_settings(settings),
                            KafkaChangeSink(producer, settings.topic_changes))
        started = time.perf_counter()
        while backlog(pool):
            stats = relay.run(max_rounds=20)
            if stats.failed_rounds:
                raise RuntimeError(f"relay failed: {stats.errors[:1]}")
            log(f"relay: {backlog(pool)} outbox rows left")
        return time.perf_counter() - started
    finally:
        producer.close()
        pool.close()


def part_count(settings: Settings) -> int:
    """Parts already stored in the benchmark namespace."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute("SELECT count(*) FROM objects WHERE namespace_id = %s"
                           " AND parent_id IS NOT NULL", (NAMESPACE,)).fetchone()
    return int(row[0]) if row else 0


def existing_parents(settings: Settings) -> list[tuple[uuid.UUID, str]]:
    """(id, title) of the stored documents, in load order."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        rows = conn.execute("SELECT id, title FROM objects WHERE namespace_id = %s"
                            " AND parent_id IS NULL ORDER BY created_at, id",
                            (NAMESPACE,)).fetchall()
    return [(r[0], r[1]) for r in rows]


def grow_to(settings: Settings, source: SourceText, parts: int, embedder: StaticEmbedder
            ) -> dict[str, float]:
    """Add documents until the namespace holds `parts` parts; timings of each step."""
    have = part_count(settings)
    if have >= parts:
        return {}
    known = existing_parents(settings)
    rng = random.Random(SEED + len(known))
    started = time.perf_counter()
    docs = make_docs(source, len(known), parts - have, rng)
    rows = object_rows(docs, embedder, settings)
    times = {"generate + embed (static)": time.perf_counter() - started}
    ids = [pid for pid, _ in known] + [d.id for d in docs]
    links: set[tuple[uuid.UUID, str, uuid.UUID]] = set()
    for doc in docs:
        for _ in range(LINKS_PER_DOC):
            target = rng.choice(ids)
            if target != doc.id:
                links.add((doc.id, rng.choice(RELATIONS), target))
    log(f"loading {len(docs)} documents, {len(rows) - len(docs)} parts, {len(links)} links")
    times |= load_rows(settings, rows, sorted(links), [d.id for d in docs])
    log("projecting into the graph (OutboxRelay) ...")
    times["relay to FalkorDB"] = relay_all(settings)
    return times


# -- measurements ----------------------------------------------------------------------------


@dataclass
class Inputs:
    """Per-request inputs: claim texts, their vectors and OR-tsqueries, titles, documents."""

    claims: list[str]
    vectors: list[np.ndarray[Any, Any]]
    tsqueries: list[str]
    titles: list[str]
    docs: list[uuid.UUID]


def make_inputs(settings: Settings, source: SourceText, embedder: StaticEmbedder,
                count: int) -> Inputs:
    """`count` of each input kind, in a fixed shuffled order."""
    rng = random.Random(SEED)
    claims = list(source.claims)
    rng.shuffle(claims)
    claims = (claims * (count // len(claims) + 1))[:count]
    vectors = list(embedder.embed(claims))
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        tsqueries = []
        for claim in claims:
            row = conn.execute("SELECT coalesce(array_agg(DISTINCT l), '{}') FROM unnest("
                               "tsvector_to_array(to_tsvector('english', %s))) AS l",
                               (claim,)).fetchone()
            tsqueries.append(bm25.tsquery_or(row[0] if row else []))
    parents = existing_parents(settings)
    picked = [parents[rng.randrange(len(parents))] for _ in range(count)]
    return Inputs(claims, vectors, tsqueries, [t for _, t in picked], [i for i, _ in picked])


@dataclass
class ScaleResult:
    """Everything measured at one scale."""

    parts: int
    docs: int
    links: int
    load: dict[str, float]
    timings: list[Timing] = field(default_factory=list)


def slices(n: int, concurrencies: Sequence[int]) -> dict[int, tuple[int, int]]:
    """The input range each concurrency level uses: n calls at 1, 2n above (so throughput runs
    last long enough); the same ranges for the floors and the engine."""
    out: dict[int, tuple[int, int]] = {}
    start = 0
    for c in concurrencies:
        count = n * (2 if c > 1 else 1)
        out[c] = (start, start + count)
        start += count
    return out


async def floors(settings: Settings, inputs: Inputs, k: int, ef: int, span: tuple[int, int],
                 concurrency: int) -> list[Timing]:
    """The bare dense and full-text top-k queries, each on its own pooled connection."""
    conns = [await psycopg.AsyncConnection.connect(settings.effective_postgres_dsn,
                                                   autocommit=True)
             for _ in range(concurrency)]
    free: asyncio.Queue[psycopg.AsyncConnection[Any]] = asyncio.Queue()
    for conn in conns:
        await register_vector_async(conn)
        await conn.execute(f"SET hnsw.ef_search = {ef}")
        free.put_nowait(conn)

    def bare(sql: str) -> Callable[[Any], Awaitable[object]]:
        async def call(param: Any) -> object:
            conn = await free.get()
            try:
                cur = await conn.execute(sql, {"p": param, "k": k}, prepare=False)
                return await cur.fetchall()
            finally:
                free.put_nowait(conn)
        return call

    try:
        dense = bare("SELECT id FROM objects ORDER BY embedding <=> %(p)s LIMIT %(k)s")
        text = bare("SELECT id FROM objects WHERE lexical @@ %(p)s::tsquery"
                    " ORDER BY ts_rank(lexical, %(p)s::tsquery) DESC LIMIT %(k)s")
        await run_concurrent("warm-up", dense, inputs.vectors[-20:], concurrency)
        await run_concurrent("warm-up", text, inputs.tsqueries[-20:], concurrency)
        lo, hi = span
        return [await run_concurrent("floor: pgvector top-k", dense, inputs.vectors[lo:hi],
                                     concurrency),
                await run_concurrent("floor: full-text top-k", text, inputs.tsqueries[lo:hi],
                                     concurrency)]
    finally:
        for conn in conns:
            await conn.close()


class NoTrigram:
    """A what-if searcher: the wired `PgPartSearcher` with the trigram channel answering
    nothing (what gating it off for natural-language queries would give)."""

    def __init__(self, inner: PgPartSearcher) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def search_trigram(self, *args: Any) -> list[Any]:
        return []


def engine_calls(services: Services) -> dict[str, tuple[Callable[[Any], Awaitable[object]],
                                                        str]]:
    """The measured operations and the input list each one takes."""
    ns = NAMESPACE
    wired = services.engine
    assert isinstance(wired.searcher, PgPartSearcher)
    what_if = RetrievalEngine(NoTrigram(wired.searcher), wired.reader,  # type: ignore[arg-type]
                              wired.result_sets, wired.catalog, wired.embed_query, wired.config)

    async def search(q: str) -> object:
        return await services.engine.search(ns, SearchQuery(q, limit=10))

    async def search_no_trigram(q: str) -> object:
        return await what_if.search(ns, SearchQuery(q, limit=10))

    async def find_exact(q: str) -> object:
        return await services.engine.find_exact(ns, SearchQuery(q, limit=10))

    async def find_objects(q: str) -> object:
        return await services.graph.find_objects(ns, q, (), SearchQuery(q).filters, 10)

    async def expand(oid: uuid.UUID) -> object:
        page = await services.graph.expand(ns, ExpandQuery((oid,), max_hops=2, limit=20))
        if page.degrade:
            raise RuntimeError(f"expand degraded: {page.degrade}")
        return page

    return {"search": (search, "claims"),
            "what-if: search without the trigram channel": (search_no_trigram, "claims"),
            "find_exact": (find_exact, "titles"),
            "find_objects": (find_objects, "claims"), "expand (2 hops)": (expand, "docs")}


async def measure_engine(settings: Settings, inputs: Inputs, n: int,
                         concurrencies: Sequence[int], budget: float) -> list[Timing]:
    """Every operation at every concurrency, through the engine as the API wires it."""
    services = await build_services(settings)
    out: list[Timing] = []
    try:
        for name, (call, kind) in engine_calls(services).items():
            items: list[Any] = getattr(inputs, kind)
            await run_concurrent("warm-up", call, items[-30:], 4, budget / 4)
            for c, (lo, hi) in slices(n, concurrencies).items():
                timing = await run_concurrent(name, call, items[lo:hi], c, budget)
                log(f"{name} c={c}: p50 {timing.ms(50):.1f} ms, p95 {timing.ms(95):.1f} ms, "
                    f"{timing.throughput:.1f}/s")
                out.append(timing)
        return out
    finally:
        await services.close()


async def channel_breakdown(settings: Settings, inputs: Inputs, n: int, budget: float
                            ) -> list[Timing]:
    """Each step of `search` alone, at concurrency 1, on the first `n` claims: where the time
    goes (the channels run concurrently inside `search`, so its latency is about the slowest
    channel plus the steps after fusion)."""
    services = await build_services(settings)
    engine = services.engine
    searcher = engine.searcher
    assert isinstance(searcher, PgPartSearcher) and engine.embed_query is not None
    embed = engine.embed_query
    ns, no_filters, k = NAMESPACE, Filters(), engine.config.candidate_k
    claims = inputs.claims[:n]
    try:
        hits = {c: await searcher.search_lexical(ns, c, no_filters, (), k) for c in claims[:5]}
        del hits  # warm the statistics caches

        async def lexical(q: str) -> object:
            return await searcher.search_lexical(ns, q, no_filters, (), k)

        async def trigram(q: str) -> object:
            return await searcher.search_trigram(ns, q, no_filters, (), k)

        async def embed_only(q: str) -> object:
            return await embed(q)

        async def dense(q: str) -> object:
            return await searcher.search_dense(ns, await embed(q), no_filters, (), k)

        out = [await run_concurrent(f"search step: {name}", call, claims, 1, budget)
               for name, call in (("lexical channel (BM25)", lexical),
                                  ("trigram channel", trigram),
                                  ("query embedding (static)", embed_only),
                                  ("dense channel (incl. embedding)", dense))]
        fused = []  # only the part after the channels: fusion, promotion, hydration, page
        for q in claims:
            lex = await searcher.search_lexical(ns, q, no_filters, (), k)
            den = await searcher.search_dense(ns, await embed(q), no_filters, (), k)
            started = time.perf_counter()
            await engine._rank_and_page(ns, q, {"lexical": lex, "dense": den}, 10, None)
            fused.append(time.perf_counter() - started)
        out.append(Timing("search step: rank, promote, hydrate, save page", 1, tuple(fused),
                          sum(fused)))
        return out
    finally:
        await services.close()


async def measure_http(settings: Settings, inputs: Inputs, n: int,
                       concurrencies: Sequence[int], budget: float) -> list[Timing]:
    """search and 2-hop expand through the real API process (uvicorn, one worker)."""
    key = "bench-key"
    env = child_env(settings) | {"BRAINSTREAM_API_KEYS": json.dumps({key: [str(NAMESPACE)]})}
    log_path = settings.resolved_data_dir / "logs" / "bench-api.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "api", "--port",
                                 str(API_PORT)], env=env, stdout=log_file,
                                stderr=subprocess.STDOUT, start_new_session=True)
    out: list[Timing] = []
    try:
        headers = {"Authorization": f"Bearer {key}"}
        # idle connections are dropped before uvicorn's 5 s keep-alive timeout closes them
        limits = httpx.Limits(max_connections=16, max_keepalive_connections=16,
                              keepalive_expiry=2.0)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{API_PORT}", headers=headers,
                                     timeout=30, limits=limits) as client:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if (await client.get("/healthz")).status_code < 500:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the API did not start; see {log_path}")
                await asyncio.sleep(0.5)

            async def post(path: str, body: dict[str, Any]) -> object:
                response = await client.post(path, json=body)
                response.raise_for_status()
                return response.json()

            async def search(q: str) -> object:
                return await post("/v1/search", {"query": q, "limit": 10})

            async def expand(oid: uuid.UUID) -> object:
                return await post("/v1/expand", {"object_id": str(oid), "max_hops": 2,
                                                 "limit": 20})

            for name, call, items in (("HTTP search", search, inputs.claims),
                                      ("HTTP expand (2 hops)", expand, inputs.docs)):
                await run_concurrent("warm-up", call, items[-30:], 4, budget / 4)
                for c, (lo, hi) in slices(n, concurrencies).items():
                    timing = await run_concurrent(name, call, items[lo:hi], c, budget)
                    log(f"{name} c={c}: p50 {timing.ms(50):.1f} ms, p95 {timing.ms(95):.1f} ms")
                    out.append(timing)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 15)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
    return out


def graph_and_link_counts(settings: Settings) -> tuple[int, int]:
    """(documents, links) of the benchmark namespace."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        docs = conn.execute("SELECT count(*) FROM objects WHERE namespace_id = %s"
                            " AND parent_id IS NULL", (NAMESPACE,)).fetchone()
        links = conn.execute("SELECT count(*) FROM links WHERE namespace_id = %s",
                             (NAMESPACE,)).fetchone()
    return int(docs[0]) if docs else 0, int(links[0]) if links else 0


# -- report ----------------------------------------------------------------------------------


def report(results: list[ScaleResult], args: argparse.Namespace, total_s: float,
           ef: int, k: int) -> str:
    """The Markdown report: one table per scale, then the targets."""
    lines = ["### Read-path latency (bench/query.py)", "", *machine_lines(),
             f"- command: `python bench/query.py {' '.join(sys.argv[1:])}`".rstrip(),
             "- data: SciFact sentences shuffled into new documents (seeded), chunked by the "
             "pipeline's chunker, static embedder (wordllama, 256 dims); queries: SciFact "
             "claims (search, find_objects, floors), document titles (find_exact), random "
             "documents (expand, max_hops=2, limit 20)",
             f"- floors: bare `ORDER BY embedding <=> v LIMIT {k}` (hnsw.ef_search={ef}, as the "
             f"engine sets it for candidate_k={k}) and bare `lexical @@ q ORDER BY "
             f"ts_rank(lexical, q) DESC LIMIT {k}` (q = OR of the claim's lexemes)",
             "- in-process: the engine as `api.wiring.build_services` wires it (pool of 8), "
             "asyncio workers on one queue; latency per call, throughput = calls / wall time",
             f"- total wall time: {total_s / 60:.1f} min", ""]
    verdicts: list[str] = []
    for res in results:
        lines += [f"#### {res.parts:,} parts ({res.docs:,} documents, {res.links:,} links)", ""]
        if res.load:
            lines.append("Load: " + ", ".join(f"{name} {secs:.0f} s"
                                               for name, secs in res.load.items()))
            lines.append("")
        floor_p95: dict[int, float] = {}
        for t in res.timings:
            if t.name.startswith("floor"):
                floor_p95[t.concurrency] = floor_p95.get(t.concurrency, 0.0) + t.ms(95)
        rows = []
        for t in res.timings:
            if t.name.startswith("search step"):
                continue
            ratio = ""
            if "search" in t.name and t.concurrency in floor_p95:
                ratio = f"{t.ms(95) / floor_p95[t.concurrency]:.1f}x"
            rows.append([t.name, t.concurrency, t.count, f"{t.ms(50):.1f}", f"{t.ms(95):.1f}",
                         f"{t.ms(99):.1f}", f"{t.throughput:.1f}", ratio, t.errors])
        lines += [md_table(["operation", "conc.", "calls", "p50 ms", "p95 ms", "p99 ms",
                            "calls/s", "p95 / sum of floor p95s", "errors"], rows), ""]
        steps = [t for t in res.timings if t.name.startswith("search step")]
        if steps:
            lines += ["Where search's time goes (each step alone, concurrency 1; inside "
                      "`search` the three channels run concurrently):", "",
                      md_table(["step", "calls", "p50 ms", "p95 ms", "mean ms"],
                               [[t.name.removeprefix("search step: "), t.count,
                                 f"{t.ms(50):.1f}", f"{t.ms(95):.1f}",
                                 f"{1000 * sum(t.latencies) / max(t.count, 1):.1f}"]
                                for t in steps]), ""]
        search = next((t for t in res.timings if t.name == "search" and t.concurrency == 1),
                      None)
        what_if = next((t for t in res.timings if t.name.startswith("what-if")
                        and t.concurrency == 1), None)
        expand = next((t for t in res.timings if t.name == "expand (2 hops)"
                       and t.concurrency == 1), None)
        if search is not None and 1 in floor_p95:
            ok = (search.ms(95) <= TARGET_SEARCH_FLOOR_RATIO * floor_p95[1]
                  and search.ms(95) < TARGET_SEARCH_MS)
            verdicts.append(
                f"- {res.parts:,} parts, search p95 (c=1) {search.ms(95):.1f} ms vs 3 x floors "
                f"{TARGET_SEARCH_FLOOR_RATIO * floor_p95[1]:.1f} ms and {TARGET_SEARCH_MS:.0f} ms"
                f": **{'PASS' if ok else 'FAIL'}**"
                + ("" if res.parts >= 100_000 else " (the target is stated for 100k)"))
        if what_if is not None and 1 in floor_p95:
            verdicts.append(
                f"  - what-if without the trigram channel: p95 {what_if.ms(95):.1f} ms "
                f"({what_if.ms(95) / floor_p95[1]:.1f}x the floors; not the product as shipped)")
        if expand is not None:
            ok = expand.ms(95) < TARGET_EXPAND_MS
            verdicts.append(f"- {res.parts:,} parts, 2-hop expand p95 (c=1) "
                            f"{expand.ms(95):.1f} ms vs {TARGET_EXPAND_MS:.0f} ms: "
                            f"**{'PASS' if ok else 'FAIL'}**")
    lines += ["#### Targets", "", *verdicts, ""]
    return "\n".join(lines)


async def measure_scale(settings: Settings, inputs: Inputs, args: argparse.Namespace,
                        concurrencies: Sequence[int], ef: int, k: int, http: bool
                        ) -> list[Timing]:
    """Floors, then the engine, then (optionally) HTTP, at the current scale."""
    timings: list[Timing] = []
    for c, span in slices(args.requests, concurrencies).items():
        timings += await floors(settings, inputs, k, ef, span, c)
    timings += await measure_engine(settings, inputs, args.requests, concurrencies, args.budget)
    if args.breakdown:
        timings += await channel_breakdown(settings, inputs, args.breakdown, args.budget)
    if http:
        timings += await measure_http(settings, inputs, args.requests, concurrencies,
                                      args.budget)
    return timings


def main() -> None:
    """Parse arguments, build each scale, measure, print the Markdown report to stdout."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", default="10000,100000",
                        help="comma-separated part counts, ascending (cumulative namespace)")
    parser.add_argument("--requests", type=int, default=150,
                        help="calls per operation at concurrency 1 (twice as many at 8)")
    parser.add_argument("--concurrency", default="1,8", help="comma-separated worker counts")
    parser.add_argument("--http", action="store_true",
                        help="also measure search and expand through the API process (at the "
                             "first scale only: the HTTP overhead does not depend on scale)")
    parser.add_argument("--budget", type=float, default=120.0,
                        help="seconds per (operation, concurrency): no call starts after it, "
                             "so a slow operation is measured on fewer calls")
    parser.add_argument("--breakdown", type=int, default=50,
                        help="claims for the per-step breakdown of search (0: skip)")
    parser.add_argument("--reuse", action="store_true",
                        help="keep the data of an earlier run (only grow it)")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    scales = sorted(int(s) for s in args.scales.split(","))
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    settings = bench_settings("query", PORT_OFFSET, "static", api_port=API_PORT)
    k = settings.search_candidate_k
    ef = min(max(2 * k, 40), 1000)  # what PgPartSearcher.search_dense sets
    source = load_source()
    embedder = StaticEmbedder()
    started = time.perf_counter()
    results: list[ScaleResult] = []
    with bench_stack(settings, fresh=not args.reuse):
        for parts in scales:
            log(f"scale {parts} parts: loading ...")
            load = grow_to(settings, source, parts, embedder)
            docs, links = graph_and_link_counts(settings)
            stored = part_count(settings)
            log(f"scale {parts}: {stored} parts, {docs} documents, {links} links; measuring")
            need = sum(stop - start for start, stop in
                       slices(args.requests, concurrencies).values()) + 50
            inputs = make_inputs(settings, source, embedder, need)
            http = args.http and parts == scales[0]  # the overhead does not depend on scale
            timings = asyncio.run(measure_scale(settings, inputs, args, concurrencies, ef, k,
                                                http))
            results.append(ScaleResult(stored, docs, links, load, timings))
    text = report(results, args, time.perf_counter() - started, ef, k)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
