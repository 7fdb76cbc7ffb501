"""Search features against plain search, in the same run, on SciFact-derived documents.

Loads `--parts` parts (default 100k) the way `bench.query` does (`data.py`: synthetic documents
chunked and embedded with the static embedder, COPY), gives every document three properties
(`color`: 12 values, `price`: 0..1000, `published`: a date over three years; set with the
triggers off, as if written so), builds the Tantivy index with the real writer, and asks the
engine as the API wires it (LEXICAL_ENGINE from the environment, tantivy by default), one call
at a time, the requests interleaved claim by claim:

- `search` (the baseline), limit 10;
- the same with a range filter matching 1% of the parts (`where` `$.price` < 10);
- the same with facets on two properties (`$.color` terms, `$.price` buckets of 100);
- the same sorted by a property (`$.price` desc: the match set's first 1,000 in that order);
- `similar_to` a document (a different one per request), limit 10.

Targets: each p95 within 2x the plain search p95 of the same run, and every range-filtered
search answers a full page (10 objects: about 160 documents pass the filter).

Usage: python -m bench.query.features [--parts 100000] [--requests 100] [--reuse]
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import psycopg

from bench.harness.inprocess import bench_settings, bench_stack, md_table
from bench.harness.runenv import (
    add_reuse_and_out,
    bench_parser,
    emit_report,
    load_average,
    log,
    quiet_logging,
)
from bench.harness.timing import Timing, run_concurrent
from bench.query.data import (
    NAMESPACE,
    SEED,
    existing_parents,
    load_rows,
    load_source,
    make_docs,
    object_rows,
    part_count,
)
from bench.query.lexical import build_lexical_index
from pipeline.domain.read_model import FacetSpec, Filters, Page, SearchQuery, SortSpec
from pipeline.embedding.embedders.static import StaticEmbedder
from pipeline.ops.lexical import rebuild_stale_lexical
from pipeline.retrieval.requests import with_where
from pipeline.settings import Settings
from pipeline.wiring import build_services, freeze_startup_heap

TARGET = 2.0  # each p95 within 2x the plain search p95
FACETS = (FacetSpec("$.color"), FacetSpec("$.price", interval=100))
SORT = SortSpec("$.price", "desc")
# `price` is spread evenly over 0..1000: below 10 holds for 1% of the documents, and of parts
NARROW = with_where(Filters(), {"jsonpath": "$.price", "lt": 10})
LIMIT = 10
_PROPERTIES = (
    "UPDATE objects SET properties = jsonb_build_object("
    " 'color', (ARRAY['red','orange','yellow','green','blue','indigo','violet','black',"
    "'white','grey','brown','pink'])[1 + abs(hashtext(id::text)) %% 12],"
    " 'price', (abs(hashtext(id::text || 'p')) %% 100000) / 100.0,"
    " 'published', to_char(date '2021-01-01' + abs(hashtext(id::text || 'd')) %% 1100,"
    " 'YYYY-MM-DD'))"
    " WHERE namespace_id = %s AND parent_id IS NULL")


def load(settings: Settings, parts: int) -> None:
    """Documents until the namespace holds `parts` parts, their properties and the index (an
    index of an older schema rebuilt, as `brainstream migrate` does)."""
    if part_count(settings) >= parts:
        if rebuild_stale_lexical(settings):
            log("rebuilt the Tantivy index (older schema)")
        build_lexical_index(settings)  # a replica as a read host keeps one (its cursor too)
        return
    source = load_source()
    rng = random.Random(SEED)
    docs = make_docs(source, len(existing_parents(settings)), parts - part_count(settings), rng)
    log(f"loading {len(docs)} documents ...")
    load_rows(settings, object_rows(docs, StaticEmbedder(), settings), [],
              [d.id for d in docs])
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE objects DISABLE TRIGGER USER")
        try:
            conn.execute(_PROPERTIES, (NAMESPACE,))
        finally:
            conn.execute("ALTER TABLE objects ENABLE TRIGGER USER")
        conn.execute("VACUUM (ANALYZE) objects")
    log("building the Tantivy index ...")
    build_lexical_index(settings)


async def measure(settings: Settings, claims: list[str]
                  ) -> tuple[dict[str, Timing], tuple[int, int]]:
    """The requests, interleaved claim by claim at concurrency 1; and how many range-filtered
    searches answered a full page, of how many."""
    services = await build_services(settings)
    freeze_startup_heap()  # as the API process does once it is wired
    parents = [pid for pid, _ in existing_parents(settings)]
    targets = random.Random(SEED).sample(parents, len(claims))
    similar_to = dict(zip(claims, targets, strict=True))
    full = [0, 0]

    async def narrow(q: str) -> Page:
        page = await services.engine.search(NAMESPACE, SearchQuery(q, limit=LIMIT,
                                                                   filters=NARROW))
        full[0] += len(page.objects) == LIMIT
        full[1] += 1
        return page

    calls: dict[str, Callable[[str], Awaitable[object]]] = {
        "search": lambda q: services.engine.search(NAMESPACE, SearchQuery(q, limit=LIMIT)),
        "search + range filter matching 1%": narrow,
        "search + facets on 2 properties": lambda q: services.engine.search(
            NAMESPACE, SearchQuery(q, limit=LIMIT, facets=FACETS)),
        "search sorted by a property": lambda q: services.engine.search(
            NAMESPACE, SearchQuery(q, limit=LIMIT, sort=SORT)),
        "similar_to a document": lambda q: services.engine.search(
            NAMESPACE, SearchQuery("", limit=LIMIT, similar_to=similar_to[q])),
    }
    latencies: dict[str, list[float]] = {name: [] for name in calls}
    try:
        for call in calls.values():  # warm-up: caches, index readers, plans
            await run_concurrent("warm-up", call, claims[-20:], 1)
        full[:] = [0, 0]
        for claim in claims[:-20]:
            for name, call in calls.items():
                timing = await run_concurrent(name, call, [claim], 1)
                latencies[name] += timing.latencies
        page = await services.engine.search(NAMESPACE, SearchQuery(claims[0], facets=FACETS))
        log(f"facets of {claims[0]!r}: {page.facets}")
    finally:
        await services.close()
    return ({name: Timing(name, 1, tuple(values), sum(values))
             for name, values in latencies.items()}, (full[0], full[1]))


def main() -> None:
    parser = bench_parser(__doc__, "python -m bench.query.features")
    parser.add_argument("--parts", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--port-offset", type=int, default=1300)
    add_reuse_and_out(parser, "keep the loaded stack from an earlier run")
    args = parser.parse_args()
    quiet_logging()
    settings = bench_settings("features", args.port_offset, "static")
    with bench_stack(settings, fresh=not args.reuse):
        load(settings, args.parts)
        claims = load_source().claims[: args.requests + 20]
        timings, (full, asked) = asyncio.run(measure(settings, claims))
    base = timings["search"].ms(95)
    rows = []
    for name, timing in timings.items():
        ratio = timing.ms(95) / base
        verdict = "-" if name == "search" else ("PASS" if ratio <= TARGET else "FAIL")
        rows.append([f"{name}, {args.parts:,} parts", "<= 2x search" if verdict != "-" else "-",
                     f"{timing.ms(50):.1f} / {timing.ms(95):.1f} ms", f"{ratio:.2f}x",
                     verdict])
    rows.append([f"range-filtered searches answering a full page of {LIMIT}", "all",
                 f"{full} / {asked}", "-", "PASS" if full == asked else "FAIL"])
    emit_report(f"load average after: {load_average()}\n\n"
                + md_table(["figure", "target", "p50 / p95", "ratio", "result"], rows),
                args.out)


if __name__ == "__main__":
    main()
