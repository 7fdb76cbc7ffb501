"""The read-path benchmark's measurements at one scale: the bare-query floors, every engine
operation as the API wires it (in-process, asyncio workers on one queue), where `search` spends
its time, and optionally the same calls through the real API process over HTTP.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import httpx
import numpy as np
import psycopg
from pgvector.psycopg import register_vector_async

from bench.harness.processes import child_env
from bench.harness.runenv import log
from bench.harness.timing import Timing, run_concurrent
from bench.query.data import NAMESPACE, SEED, SourceText, existing_parents
from bench.query.footprint import serving_cpu
from pipeline.domain import bm25
from pipeline.domain.read_model import ExpandQuery, Filters, SearchQuery
from pipeline.embedding.embedders.static import StaticEmbedder
from pipeline.retrieval.engine import RetrievalEngine
from pipeline.retrieval.store.search import PgPartSearcher
from pipeline.settings import Settings
from pipeline.wiring import Services, build_services, freeze_startup_heap


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
        # the rows the HNSW index holds (migration 0057: without live parts)
        dense = bare("SELECT id FROM object_embeddings WHERE NOT has_live_parts"
                     " ORDER BY embedding <=> %(p)s"
                     " LIMIT %(k)s")
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


def engine_calls(services: Services) -> dict[str, tuple[Callable[[Any], Awaitable[object]],
                                                        str]]:
    """The measured operations and the input list each one takes."""
    ns = NAMESPACE
    wired = services.engine
    # what-if: the wired engine without the trigram channel (what gating it off for
    # natural-language queries would give)
    what_if = RetrievalEngine(
        wired.searcher, wired.reader, wired.result_sets, wired.catalog, wired.embed_query,
        replace(wired.config, exact_channels=("lexical",)),
        channels=[c for name, c in wired.channels.items() if name != "trigram"])

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


# What an API that has served for a while holds in Postgres's memory and the benchmark's stack,
# just started, does not: the HNSW graph, the vectors' rows and the objects' keys (the rows the
# page reads are warmed by the calls themselves).
PREWARM = ("object_embeddings_hnsw", "object_embeddings", "objects_pkey", "objects_parent")


def prewarm(settings: Settings) -> None:
    """Load `PREWARM` into shared buffers (pg_prewarm), as far as they fit."""
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        for relation in PREWARM:
            conn.execute("SELECT pg_prewarm(%s::regclass)", (relation,))


async def measure_engine(settings: Settings, inputs: Inputs, n: int,
                         concurrencies: Sequence[int], budget: float) -> list[Timing]:
    """Every operation at every concurrency, through the engine as the API wires it."""
    prewarm(settings)
    services = await build_services(settings)
    freeze_startup_heap()  # as the API process does once it is wired
    out: list[Timing] = []
    try:
        for name, (call, kind) in engine_calls(services).items():
            items: list[Any] = getattr(inputs, kind)
            await run_concurrent("warm-up", call, items[-30:], 4, budget / 4)
            for c, (lo, hi) in slices(n, concurrencies).items():
                cpu = serving_cpu(settings, os.getpid())
                timing = await run_concurrent(name, call, items[lo:hi], c, budget)
                timing = replace(timing, cpu=serving_cpu(settings, os.getpid()) - cpu)
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
    freeze_startup_heap()  # as the API process does once it is wired
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
            await engine.rank_and_page(ns, q, {"lexical": lex, "dense": den}, 10, None)
            fused.append(time.perf_counter() - started)
        out.append(Timing("search step: rank, promote, hydrate, save page", 1, tuple(fused),
                          sum(fused)))
        return out
    finally:
        await services.close()


async def measure_http(settings: Settings, inputs: Inputs, n: int,
                       concurrencies: Sequence[int], budget: float) -> list[Timing]:
    """search and 2-hop expand through the real API process (uvicorn, API_WORKERS worker
    processes: the cores by default)."""
    key = "bench-key"
    port = settings.api_port
    env = child_env(settings) | {"BRAINSTREAM_API_KEYS": json.dumps({key: [str(NAMESPACE)]})}
    log_path = settings.resolved_data_dir / "logs" / "bench-api.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "api", "--port",
                                 str(port)], env=env, stdout=log_file,
                                stderr=subprocess.STDOUT, start_new_session=True)
    out: list[Timing] = []
    try:
        headers = {"Authorization": f"Bearer {key}"}
        # idle connections are dropped before uvicorn's 5 s keep-alive timeout closes them
        limits = httpx.Limits(max_connections=16, max_keepalive_connections=16,
                              keepalive_expiry=2.0)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers,
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
                    cpu = serving_cpu(settings, proc.pid)
                    timing = await run_concurrent(name, call, items[lo:hi], c, budget)
                    timing = replace(timing, cpu=serving_cpu(settings, proc.pid) - cpu)
                    log(f"{name} c={c}: p50 {timing.ms(50):.1f} ms, p95 {timing.ms(95):.1f} ms"
                        f", {timing.cpu / timing.wall:.2f} cores busy")
                    out.append(timing)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 15)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
    return out


async def measure_scale(settings: Settings, inputs: Inputs, args: argparse.Namespace,
                        concurrencies: Sequence[int], ef: int, k: int, http: bool
                        ) -> list[Timing]:
    """The engine, then the floors, then (optionally) HTTP, at the current scale. The floors
    come after the engine: the bare full-text top-k ranks every matching row (a third of the
    table's tsvectors read per query), which leaves the buffer cache to the engine's first
    calls to fill again."""
    timings = await measure_engine(settings, inputs, args.requests, concurrencies, args.budget)
    for c, span in slices(args.requests, concurrencies).items():
        timings += await floors(settings, inputs, k, ef, span, c)
    if args.breakdown:
        timings += await channel_breakdown(settings, inputs, args.breakdown, args.budget)
    if http:
        timings += await measure_http(settings, inputs, args.requests, concurrencies,
                                      args.budget)
    return timings
