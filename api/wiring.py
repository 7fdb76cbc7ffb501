"""Builds the API's adapters once per process and hands them to the routes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg_pool import AsyncConnectionPool

from pipeline.domain.errors import NotFound, Unavailable
from pipeline.domain.settings import Settings
from pipeline.embedding.embedders import build_embedder
from pipeline.graph.falkordb.reconnecting import ReconnectingGraphReader
from pipeline.ports import Embedder
from pipeline.retrieval.engine import EngineConfig, RetrievalEngine
from pipeline.retrieval.graph_queries import GraphConfig, GraphQueries
from pipeline.stores.postgres.kinds import CachedCatalog
from pipeline.stores.postgres.pool import make_async_pool
from pipeline.stores.postgres.read import PgObjectReader
from pipeline.stores.postgres.recipes import RecipeStore
from pipeline.stores.postgres.search import PgPartSearcher
from pipeline.stores.redis.resultsets import RedisResultSets

log = logging.getLogger(__name__)

FILTER_NOTE = (
    "Filters apply to search, find_exact and find_objects as {\"filters\": {...}}: "
    "kind (a kind or a list), title (case-insensitive substring), created_after, created_before, "
    "updated_after, updated_before (ISO-8601), and any filterable field below as "
    "\"<field>\": value (eq) or \"<field>\": [values] (in, where the field allows it). "
    "A part is filtered by its parent. An empty catalog means open mode: any property "
    "may be filtered with eq/in."
)


@dataclass
class Services:
    settings: Settings
    pool: AsyncConnectionPool
    engine: RetrievalEngine
    graph: GraphQueries
    recipes: RecipeStore
    result_sets: RedisResultSets
    catalog: CachedCatalog
    graph_reader: ReconnectingGraphReader
    embedder: Embedder | None = None
    closers: list[Any] = field(default_factory=list)

    async def describe_schema(self, kind: str | None) -> dict[str, Any]:
        catalog = await self.catalog()
        specs = catalog.specs
        if kind is not None:
            specs = [s for s in specs if s.kind == kind]
            if not specs:
                raise NotFound(f"unknown kind {kind!r}", field="kind")
        return {
            "open_mode": catalog.is_open,
            "kinds": [{
                "kind": s.kind, "description": s.description, "is_parent": s.is_parent,
                "is_part": s.is_part,
                "fields": [{"name": f.name, "type": f.type, "description": f.description,
                            "required": f.required, "operators": list(f.operators),
                            "filterable": bool(f.operators), "examples": list(f.examples)}
                           for f in s.fields],
            } for s in specs],
            "filter_usage": FILTER_NOTE,
            "endpoints_with_filters": ["search", "find_exact", "find_objects"],
        }

    async def check(self) -> dict[str, str]:
        checks: dict[str, str] = {}
        try:
            async with self.pool.connection(timeout=2.0) as conn:  # readiness must not hang
                await conn.execute("SELECT 1")
            checks["postgres"] = "ok"
        except Exception as exc:
            checks["postgres"] = f"error: {exc}"
        try:
            await self.result_sets.ping()
            checks["redis"] = "ok"
        except Exception as exc:
            checks["redis"] = f"error: {exc}"
        try:
            await self.graph_reader.ping()
            checks["falkordb"] = "ok"
        except Exception as exc:
            checks["falkordb"] = f"error: {exc}"
        checks["embedder"] = "ok" if self.embedder is not None else "error: not loaded"
        return checks

    async def close(self) -> None:
        await self.result_sets.close()
        await self.pool.close()
        await self.graph_reader.aclose()


async def build_services(settings: Settings) -> Services:
    """Connect the adapters; the graph and the embedder may be down (answers degrade)."""
    pool = await make_async_pool(settings)
    catalog = CachedCatalog(pool)
    embedder: Embedder | None
    try:
        embedder = await asyncio.to_thread(build_embedder, settings)
        await asyncio.to_thread(embedder.embed, ["warm-up"])
    except Exception as exc:  # the API still serves lexical-only answers
        log.error("embedder unavailable at start-up: %s", exc)
        embedder = None

    async def embed_query(text: str) -> Sequence[float]:
        if embedder is None:
            raise Unavailable("embedder not loaded")
        try:
            vectors = await asyncio.to_thread(embedder.embed, [text])
        except Unavailable:
            raise
        except Exception as exc:
            raise Unavailable(f"embedder: {exc}") from exc
        return [float(x) for x in vectors[0]]

    result_sets = RedisResultSets.from_url(settings.effective_redis_url,
                                           ttl_seconds=settings.result_set_ttl)
    config = EngineConfig(candidate_k=settings.search_candidate_k, rrf_k=settings.rrf_k,
                          decay_lambda=settings.decay_lambda, evidence_n=settings.evidence_n)
    searcher = PgPartSearcher(pool, stats_ttl=settings.search_stats_ttl,
                              trigram_threshold=settings.trigram_threshold)
    engine = RetrievalEngine(searcher, PgObjectReader(pool), result_sets, catalog,
                             embed_query, config)
    graph_reader = ReconnectingGraphReader(settings)
    return Services(settings=settings, pool=pool, engine=engine,
                    graph=GraphQueries(
                        graph_reader, reader=engine.reader, pager=engine.pager, catalog=catalog,
                        embed_query=embed_query, fallback=engine.search,
                        config=GraphConfig(candidate_k=config.candidate_k, rrf_k=config.rrf_k)),
                    recipes=RecipeStore(pool, dict(settings.expand_recipes)),
                    result_sets=result_sets, catalog=catalog, graph_reader=graph_reader,
                    embedder=embedder)


class ActiveServices:
    """Follows the active index generation: one `Services` per generation, the pointer re-read
    every `ttl` seconds in the background. A switch builds the new generation's services first
    (pools, graph reader, its embedder) and then swaps them in, so no request is answered from a
    half-built generation nor waits for the build; the old services close after `grace`
    seconds (requests in flight finish on them)."""

    def __init__(self, base: Settings, publish: Any, *, ttl: float = 1.0,
                 grace: float = 30.0) -> None:
        self.base = base
        self.publish = publish  # called with the new Services (sets app.state.services)
        self.ttl = ttl
        self.grace = grace
        self.current: Services | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._retired: list[Services] = []

    async def start(self) -> Services:
        from pipeline.ops.generations import active_generation

        gen = await asyncio.to_thread(active_generation, self.base)
        self.current = await build_services(gen.settings(self.base))
        self.publish(self.current)
        self._spawn(self._follow())
        return self.current

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _follow(self) -> None:
        from pipeline.ops.generations import active_generation

        while True:
            await asyncio.sleep(self.ttl)
            try:
                gen = await asyncio.to_thread(active_generation, self.base)
                if self.current is None or gen.id == self.current.settings.generation:
                    continue
                fresh = await build_services(gen.settings(self.base))
            except Exception as exc:  # keep serving the current generation; retry next tick
                log.warning("cannot follow the active generation: %s", exc)
                continue
            old, self.current = self.current, fresh
            self.publish(fresh)
            log.info("reads switched to index generation %d", gen.id)
            self._retired.append(old)
            self._spawn(self._close_later(old))

    async def _close_later(self, old: Services) -> None:
        await asyncio.sleep(self.grace)
        if old in self._retired:
            self._retired.remove(old)
            await old.close()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for svc in [*self._retired, *([self.current] if self.current else [])]:
            await svc.close()
        self._retired.clear()
