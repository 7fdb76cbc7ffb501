"""The read side's services, built once per process (and per index generation): the adapters
the API routes and the benchmarks call, wired to one another.

`build_services(settings)` connects Postgres (one async pool), Redis (result sets), FalkorDB
(a reconnecting reader) and the query embedder, and builds the retrieval engine and the graph
queries over them. The graph and the embedder may be down: the answers degrade, labelled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from pipeline.domain.errors import Unavailable
from pipeline.domain.settings import Settings
from pipeline.embedding.embedders import build_embedder
from pipeline.graph.falkordb.reconnecting import ReconnectingGraphReader
from pipeline.ports import Embedder, QueryEmbedder
from pipeline.retrieval.channels import standard_channels
from pipeline.retrieval.engine import EngineConfig, RetrievalEngine
from pipeline.retrieval.graph_queries import GraphConfig, GraphQueries
from pipeline.stores.postgres.kinds import CachedCatalog
from pipeline.stores.postgres.pool import AsyncConn, make_async_pool, ping_pool
from pipeline.stores.postgres.read import PgObjectReader
from pipeline.stores.postgres.recipes import RecipeStore
from pipeline.stores.postgres.search import PgPartSearcher
from pipeline.stores.redis.resultsets import RedisResultSets

log = logging.getLogger(__name__)


@dataclass
class Services:
    """What a read request needs: the engine, the graph queries, the recipes and the catalog,
    and the adapters under them (for readiness checks and closing)."""

    settings: Settings
    pool: AsyncConnectionPool[AsyncConn]
    engine: RetrievalEngine
    graph: GraphQueries
    recipes: RecipeStore
    result_sets: RedisResultSets
    catalog: CachedCatalog
    graph_reader: ReconnectingGraphReader
    embedder: Embedder | None = None

    async def check(self) -> dict[str, str]:
        """Each dependency's state: "ok" or "error: <why>" (the readiness probe's answer)."""
        checks: dict[str, str] = {}
        try:
            await ping_pool(self.pool, timeout=2.0)  # readiness must not hang
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
        """Close the connections (Redis, Postgres, the graph)."""
        await self.result_sets.close()
        await self.pool.close()
        await self.graph_reader.aclose()


async def load_embedder(settings: Settings) -> Embedder | None:
    """The configured embedder, warmed up; None (logged) when it cannot load: the API still
    serves lexical-only answers."""
    try:
        embedder = await asyncio.to_thread(build_embedder, settings)
        await asyncio.to_thread(embedder.embed, ["warm-up"])
    except Exception as exc:
        log.error("embedder unavailable at start-up: %s", exc)
        return None
    return embedder


def query_embedder(embedder: Embedder | None) -> QueryEmbedder:
    """Embeds one query text off the event loop; any failure (or no embedder) is Unavailable."""

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

    return embed_query


async def build_services(settings: Settings) -> Services:
    """Connect the adapters and build the read side on them; the graph and the embedder may be
    down (answers degrade)."""
    pool = await make_async_pool(settings, statement_timeout=settings.api_statement_timeout)
    catalog = CachedCatalog(pool)
    embedder = await load_embedder(settings)
    embed_query = query_embedder(embedder)
    result_sets = RedisResultSets.from_url(settings.effective_redis_url,
                                           ttl_seconds=settings.result_set_ttl)
    config = EngineConfig(candidate_k=settings.search_candidate_k, rrf_k=settings.rrf_k,
                          decay_lambda=settings.decay_lambda, evidence_n=settings.evidence_n,
                          snippet_max_terms=settings.api_snippet_max_terms,
                          max_query_terms=settings.api_max_query_terms,
                          max_filters=settings.api_max_filters)
    searcher = PgPartSearcher(pool, stats_ttl=settings.search_stats_ttl,
                              trigram_threshold=settings.trigram_threshold,
                              trigram_max_words=settings.trigram_max_words)
    reader = PgObjectReader(pool)
    # the channels search fuses: a new channel is one more entry here
    channels = [*standard_channels(searcher, embed_query, embed_timeout=config.embed_timeout)]
    engine = RetrievalEngine(searcher, reader, result_sets, catalog, embed_query, config,
                             channels=channels)
    graph_reader = ReconnectingGraphReader(settings)
    graph = GraphQueries(graph_reader, reader=reader, pager=engine.pager, catalog=catalog,
                         embed_query=embed_query, fallback=engine.search,
                         config=GraphConfig(candidate_k=config.candidate_k, rrf_k=config.rrf_k,
                                            max_results=config.max_results,
                                            embed_timeout=config.embed_timeout,
                                            max_query_terms=config.max_query_terms,
                                            max_filters=config.max_filters))
    return Services(settings=settings, pool=pool, engine=engine, graph=graph,
                    recipes=RecipeStore(pool, dict(settings.expand_recipes)),
                    result_sets=result_sets, catalog=catalog, graph_reader=graph_reader,
                    embedder=embedder)
