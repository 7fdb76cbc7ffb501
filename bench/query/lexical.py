"""The read-path benchmark's lexical measurements at one scale: the lexical index built by the
real writer from its queue (the bulk load's COPY queued every root through the triggers), then,
at concurrency 1 on the same claims: the SQL BM25 channel, the Tantivy channel as the API wires
it (Postgres analyses the query, cached; filters none; a thread hop), and the floor, a bare
Tantivy top-k on the same index with the claim's lexemes already in hand; near-spellings on
both engines; and `search` as the API wires it on LEXICAL_ENGINE=tantivy at every concurrency.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

import tantivy

from bench.harness.runenv import log
from bench.harness.timing import Timing, run_concurrent
from bench.query.data import NAMESPACE
from bench.query.measure import Inputs, slices
from pipeline.domain.read_model import Filters, SearchQuery
from pipeline.lexical.documents import SCHEMA, TEXT
from pipeline.lexical.searcher import TantivySearcher
from pipeline.lexical.writer import LexicalWriter
from pipeline.postgres.pool import make_pool
from pipeline.retrieval.store.search import PgPartSearcher
from pipeline.settings import Settings
from pipeline.wiring import build_services
from pipeline.wiring.services import SEARCH

TARGET_LEXICAL_FLOOR_RATIO = 3.0
CHANNEL = "lexical: Tantivy channel"
FLOOR = "lexical floor: bare Tantivy top-k"


def build_lexical_index(settings: Settings) -> tuple[int, float]:
    """Drain the lexical queue with the real writer; (documents written, seconds)."""
    pool = make_pool(settings, max_size=2, name="bench-lexical")
    started = time.perf_counter()
    documents = 0
    try:
        writer = LexicalWriter(settings, pool)
        while True:
            stats = writer.run(max_rounds=50)
            documents += stats.documents
            left = writer.pending()
            log(f"lexical index: {documents} documents written, {left} log rows left")
            if not left:
                break
    finally:
        pool.close()
    return documents, time.perf_counter() - started


async def measure_lexical(settings: Settings, inputs: Inputs, n: int,
                          concurrencies: Sequence[int], budget: float) -> list[Timing]:
    """The lexical channels and their floor at c=1, then search on tantivy at every c."""
    tantivy_settings = settings.model_copy(update={"lexical_engine": "tantivy"})
    services = await build_services(tantivy_settings)
    out: list[Timing] = []
    try:
        sql = services.engine.searcher
        assert isinstance(sql, PgPartSearcher)
        index = TantivySearcher(settings.resolved_data_dir, settings.generation,
                                sql.query_lexemes)
        ns, none, k = NAMESPACE, Filters(), SEARCH.candidate_k
        claims = inputs.claims[:n]
        lexemes = {c: await sql.query_lexemes(c) for c in claims}  # the floor's are in hand
        opened = index.index(ns)
        assert opened is not None, "no lexical index: the writer did not run"
        floor_queries = {c: tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(SCHEMA, TEXT, t))
             for t in lexemes[c]]) for c in claims if lexemes[c]}

        async def floor(q: str) -> object:
            return opened.searcher().search(floor_queries[q], k, count=False).hits

        calls: list[tuple[str, Callable[[str], Awaitable[object]], list[str]]] = [
            ("lexical: SQL BM25 channel",
             lambda q: sql.search_lexical(ns, q, none, (), k), claims),
            (CHANNEL, lambda q: index.search_lexical(ns, q, none, (), k), claims),
            (FLOOR, floor, [c for c in claims if c in floor_queries]),
            ("near-spellings: trigram channel (SQL)",
             lambda q: sql.search_trigram(ns, q, none, (), k), claims),
            ("near-spellings: fuzzy channel (Tantivy)",
             lambda q: index.search_fuzzy(ns, q, none, (), k), claims),
        ]
        for name, call, items in calls:
            await run_concurrent("warm-up", call, items[:20], 1, budget / 4)
            timing = await run_concurrent(name, call, items, 1, budget)
            log(f"{name}: p50 {timing.ms(50):.1f} ms, p95 {timing.ms(95):.1f} ms")
            out.append(timing)

        async def search(q: str) -> object:
            return await services.engine.search(ns, SearchQuery(q, limit=10))

        await run_concurrent("warm-up", search, inputs.claims[-30:], 4, budget / 4)
        for c, (lo, hi) in slices(n, concurrencies).items():
            timing = await run_concurrent("search (lexical_engine=tantivy)", search,
                                          inputs.claims[lo:hi], c, budget)
            log(f"search on tantivy c={c}: p50 {timing.ms(50):.1f} ms, "
                f"p95 {timing.ms(95):.1f} ms, {timing.throughput:.1f}/s")
            out.append(timing)
        return out
    finally:
        await services.close()


def lexical_verdict(parts: int, timings: Sequence[Timing]) -> str | None:
    """PASS/FAIL of "lexical p95 within 3x the Tantivy floor" at this scale."""
    channel = next((t for t in timings if t.name == CHANNEL), None)
    floor = next((t for t in timings if t.name == FLOOR), None)
    if channel is None or floor is None:
        return None
    ok = channel.ms(95) <= TARGET_LEXICAL_FLOOR_RATIO * floor.ms(95)
    return (f"- {parts:,} parts, lexical (Tantivy channel) p95 {channel.ms(95):.1f} ms vs "
            f"{TARGET_LEXICAL_FLOOR_RATIO:.0f} x the Tantivy floor {floor.ms(95):.2f} ms = "
            f"{TARGET_LEXICAL_FLOOR_RATIO * floor.ms(95):.1f} ms: **{'PASS' if ok else 'FAIL'}**")
