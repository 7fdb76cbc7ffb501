"""The read side's services, built once per process (and per index generation): the adapters
the API routes and the benchmarks call, wired to one another.

`build_services(settings)` connects Postgres (one async pool; a second on the read standby
when POSTGRES_READ_DSN names one, chosen per request: `pipeline/postgres/routing.py`), Redis
(result sets, in their own database), FalkorDB (a reconnecting reader) and the query embedder
(loaded again in the background while it fails: `pipeline/wiring/embedder.py`), and builds the
retrieval engine and the graph queries over them. The graph and the embedder may be down: the
answers degrade, labelled.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

from psycopg_pool import AsyncConnectionPool

from pipeline.domain.errors import Unavailable
from pipeline.embedding.embedders import build_name_embedder, same_name_embedder
from pipeline.embedding.identity import vector_space
from pipeline.graph.falkordb.reconnecting import ReconnectingGraphReader
from pipeline.ingest.store.catalog import CachedCatalog
from pipeline.lexical.facets import TantivyFacets
from pipeline.lexical.postings_switch import NOT_MAINTAINED, postings_maintained_async
from pipeline.lexical.replica import replica_cursor
from pipeline.lexical.searcher import TantivySearcher
from pipeline.memory.store.read import PgMemoryReader
from pipeline.ports import Channel, Embedder, MentionReader, QueryEmbedder
from pipeline.postgres.pool import AsyncConn, make_async_pool, ping_pool
from pipeline.postgres.read_floors import ReadFloors
from pipeline.postgres.routing import ReadRouter, floor_ttl
from pipeline.postgres.standby import StandbyMonitor
from pipeline.retrieval.channels import standard_channels
from pipeline.retrieval.channels.fuzzy import FuzzyChannel
from pipeline.retrieval.channels.lexical import LexicalChannel
from pipeline.retrieval.engine import EngineConfig, RetrievalEngine
from pipeline.retrieval.graph.entities import EntityQueries
from pipeline.retrieval.graph.paths import PathConfig, PathFinder
from pipeline.retrieval.graph.queries import GraphConfig, GraphQueries
from pipeline.retrieval.ppr.snapshots import PprSnapshots, SnapshotConfig
from pipeline.retrieval.ppr.stage import PprConfig, PprStage
from pipeline.retrieval.rerank import rerank_stage
from pipeline.retrieval.store.entities import PgEntityReader
from pipeline.retrieval.store.likeness import PgLikenessSource
from pipeline.retrieval.store.link_versions import PgLinkVersions
from pipeline.retrieval.store.matchset import PgMatchSet
from pipeline.retrieval.store.mentions import PgMentionReader
from pipeline.retrieval.store.objects import PgObjectReader
from pipeline.retrieval.store.paths import PgPathGraph
from pipeline.retrieval.store.ppr_graph import PgEntityGraph
from pipeline.retrieval.store.ppr_snapshot import PgEntitySnapshotSource
from pipeline.retrieval.store.recipes import RecipeStore
from pipeline.retrieval.store.resultsets import RedisResultSets
from pipeline.retrieval.store.search import PgPartSearcher
from pipeline.settings import Settings
from pipeline.wiring.embedder import QueryEmbedderLoader
from pipeline.wiring.lexical_follower import (
    REPLICA_BEHIND,
    REPLICA_BUILDING,
    ReplicaLag,
    replica_lag_async,
)


@dataclass
class Services:
    """What a read request needs: the engine, the graph queries, the recipes, the catalog,
    the path finder and the entity reads, and the adapters under them (for readiness checks
    and closing)."""

    settings: Settings
    pool: AsyncConnectionPool[AsyncConn]  # the primary's: writes, and reads outside requests
    reads: ReadRouter  # which server a request's reads go to (the standby's pool is its)
    engine: RetrievalEngine
    graph: GraphQueries
    recipes: RecipeStore
    result_sets: RedisResultSets
    catalog: CachedCatalog
    graph_reader: ReconnectingGraphReader
    embedder_loader: QueryEmbedderLoader
    mentions: MentionReader
    paths: PathFinder
    entities: EntityQueries
    memory: PgMemoryReader
    ppr_snapshots: PprSnapshots | None = None  # PPR_WALK=snapshot: this process's snapshots
    # the embedder of entity names when it is not the query embedder (ENTITY_NAME_EMBEDDER)
    name_embedder_loader: QueryEmbedderLoader | None = None

    @property
    def embedder(self) -> Embedder | None:
        """The query embedder, None until it has loaded (it may load after start-up)."""
        return self.embedder_loader.current

    @property
    def name_embedder(self) -> Embedder | None:
        """The embedder of entity names (/v1/resolve's embedding layer), None until loaded."""
        loader = self.name_embedder_loader or self.embedder_loader
        return loader.current

    async def check(self) -> dict[str, str | None]:
        """Each dependency's state: None when it answers, else why not (for the logs: the text
        may name hosts and ports, so the readiness probe answers only "ok" or "down")."""
        probes = {"postgres": lambda: ping_pool(self.pool, timeout=2.0),  # must not hang
                  "redis": self.result_sets.ping, "falkordb": self.graph_reader.ping}
        checks: dict[str, str | None] = {}
        for name, probe in probes.items():
            try:
                await probe()
                checks[name] = None
            except Exception as exc:
                checks[name] = f"{type(exc).__name__}: {exc}"
        checks["embedder"] = None if self.embedder is not None else "not loaded"
        if self.settings.lexical_engine == "tantivy" and checks["postgres"] is None:
            # this host's replica: not ready while it builds itself or lags past the bound
            try:
                lag = await self.lexical_lag()
                bound = self.settings.lexical_replica_max_lag
                checks["lexical_replica"] = (
                    REPLICA_BUILDING if not lag.built else
                    None if lag.seconds <= bound else f"{REPLICA_BEHIND} ({lag.seconds:.1f} s)")
            except Exception as exc:
                checks["lexical_replica"] = f"{type(exc).__name__}: {exc}"
        if self.settings.lexical_engine == "postgres" and checks["postgres"] is None:
            # the SQL channels read postings that only a database migrated for them keeps
            try:
                maintained = await postings_maintained_async(self.pool)
                checks["sql_postings"] = None if maintained else NOT_MAINTAINED
            except Exception as exc:
                checks["sql_postings"] = f"{type(exc).__name__}: {exc}"
        return checks

    async def lexical_lag(self) -> ReplicaLag:
        """How far this host's lexical replica of the generation is behind the log."""
        async with self.pool.connection() as conn:
            return await replica_lag_async(self.settings, conn)

    async def close(self) -> None:
        """Stop loading the embedder and close the connections (Redis, Postgres, the graph)."""
        await self.embedder_loader.close()
        if self.name_embedder_loader is not None:
            await self.name_embedder_loader.close()
        if self.ppr_snapshots is not None:
            await self.ppr_snapshots.close()
        if self.engine.reranker is not None:
            self.engine.reranker.close()
        await self.result_sets.close()
        await self.reads.close()
        await self.pool.close()
        await self.graph_reader.aclose()


def query_embedder(embedder: Callable[[], Embedder | None]) -> QueryEmbedder:
    """Embeds one query text off the event loop with the embedder `embedder()` gives now; any
    failure (or no embedder yet) is Unavailable."""

    async def embed_query(text: str) -> Sequence[float]:
        current = embedder()
        if current is None:
            raise Unavailable("embedder not loaded")
        try:
            vectors = await asyncio.to_thread(current.embed, [text])
        except Unavailable:
            raise
        except Exception as exc:
            raise Unavailable(f"embedder: {exc}") from exc
        return [float(x) for x in vectors[0]]

    return embed_query


# The read side's tuned constants: what the engine's and PPR's own defaults leave out, chosen on
# SciFact and HotpotQA (docs/performance.md, "Retrieval quality"; docs/entities.md, "Why the
# defaults"). Each channel's vote in the fusion: lexical 1.25, near-spellings 0.5, dense 1; the
# PPR list votes 0.8 against the hybrid list's 1. Rebuilt per `build_services`, so a test may
# swap them.
SEARCH = EngineConfig(channel_weights=(("lexical", 1.25), ("trigram", 0.5), ("fuzzy", 0.5)),
                      ppr_list_weight=0.8)
# PPR ranks rows by the mass their edges bring per unit of degree, and takes the hybrid list's
# best 30 rows as weak seeds (0.05): HotpotQA auto R@5 0.860 -> 0.890, SciFact within 0.005.
PPR = PprConfig(passage_seed_weight=0.05, degree_normalised=True)
# Entity find and expansion: the graph queries' own bounds (a find asks each channel for more
# candidates, x4 a round, up to 1,000 per channel when filters leave the page short).
FIND = GraphConfig()
# Corpus statistics (BM25's document counts, the PPR hubs' row counts) are read again after this
# many seconds: they move slowly, and reading them costs a scan of the namespace.
STATS_TTL = 300.0
# A snapshot build reads a whole namespace's entity layer, on a connection of its own: its
# statements may take longer than a request's statement timeout.
SNAPSHOT_BUILD_TIMEOUT = 300.0


def ppr_stage(settings: Settings, pool: AsyncConnectionPool[AsyncConn]) -> PprStage:
    """The PPR stage of search modes ppr and auto, over the entity layer in Postgres (walked
    on in-memory snapshots of it with PPR_WALK=snapshot)."""
    snapshots = None
    if settings.ppr_walk == "snapshot":
        source = PgEntitySnapshotSource(pool, build_timeout=SNAPSHOT_BUILD_TIMEOUT)
        snapshots = PprSnapshots(source, SnapshotConfig(max_bytes=settings.ppr_snapshot_max_bytes))
    return PprStage(PgEntityGraph(pool, rows_ttl=STATS_TTL), PPR, snapshots)


async def build_services(settings: Settings) -> Services:
    """Connect the adapters and build the read side on them; the graph and the embedder may be
    down (answers degrade)."""
    pool = await make_async_pool(settings, max_size=settings.api_pool_size,
                                 statement_timeout=settings.api_statement_timeout)
    reads = await read_router(settings, pool)
    catalog = CachedCatalog(pool)
    embedder = QueryEmbedderLoader(settings)
    await embedder.start()
    embed_query = query_embedder(lambda: embedder.current)
    names = None
    if not same_name_embedder(settings):
        names = QueryEmbedderLoader(settings, build=build_name_embedder)
        await names.start()
    result_sets = RedisResultSets.from_url(settings.result_set_redis_url,
                                           ttl_seconds=settings.result_set_ttl)
    config = replace(SEARCH, decay_lambda=settings.decay_lambda)
    searcher = PgPartSearcher(pool, stats_ttl=STATS_TTL)
    reader = PgObjectReader(pool)
    # the channels search fuses: a new channel is one more entry here
    channels = [*standard_channels(searcher, embed_query, embed_timeout=config.embed_timeout)]
    match_sets = PgMatchSet(pool)
    if settings.lexical_engine == "tantivy":
        index = TantivySearcher(settings.resolved_data_dir, settings.generation,
                                searcher.query_lexemes,
                                replica_cursor=partial(replica_cursor, settings))
        channels = [*lexical_channels(index),
                    *(c for c in channels if c.name not in ("lexical", "trigram"))]
        config = replace(config, exact_channels=("lexical", "fuzzy"))
        match_sets = PgMatchSet(pool, index=TantivyFacets(index))
        searcher.where_roots_index = index.where_roots
    ppr = ppr_stage(settings, pool)
    engine = RetrievalEngine(searcher, reader, result_sets, catalog, embed_query, config,
                             channels=channels, ppr=ppr, reranker=rerank_stage(settings.reranker),
                             match_sets=match_sets, likeness=PgLikenessSource(pool),
                             vector_space=vector_space(settings))
    graph_reader = ReconnectingGraphReader(settings)
    graph = GraphQueries(graph_reader, reader=reader, pager=engine.pager, catalog=catalog,
                         embed_query=embed_query, fallback=engine.search,
                         config=replace(FIND, candidate_k=config.candidate_k,
                                        rrf_k=config.rrf_k, max_results=config.max_results,
                                        embed_timeout=config.embed_timeout,
                                        max_query_terms=config.max_query_terms,
                                        max_filters=config.max_filters),
                         history=PgLinkVersions(pool))
    return Services(settings=settings, pool=pool, reads=reads, engine=engine, graph=graph,
                    recipes=RecipeStore(pool, dict(settings.expand_recipes)),
                    result_sets=result_sets, catalog=catalog, graph_reader=graph_reader,
                    embedder_loader=embedder, mentions=PgMentionReader(pool),
                    paths=PathFinder(PgPathGraph(pool), PathConfig()),
                    entities=EntityQueries(PgEntityReader(pool),
                                           max_query_terms=config.max_query_terms),
                    memory=PgMemoryReader(pool), ppr_snapshots=ppr.snapshots,
                    name_embedder_loader=names)


# A read waits at most this long for a standby connection before it reads the primary instead
# (a standby that has just gone down costs the reads of one probe interval this much, no more).
STANDBY_WAIT_SECONDS = 1.0


async def read_router(settings: Settings,
                      primary: AsyncConnectionPool[AsyncConn]) -> ReadRouter:
    """The router of the read side's requests: the primary alone, or with the read standby
    (its pool opened without waiting: a standby that is down leaves the API serving from the
    primary) and its monitor, measured once before the first request."""
    floors = ReadFloors(settings.result_set_redis_url,
                        ttl_seconds=floor_ttl(settings.postgres_read_max_lag))
    standby_dsn = settings.effective_postgres_read_dsn
    if standby_dsn is None:
        return ReadRouter(primary, floors)
    standby = await make_async_pool(settings, max_size=settings.api_pool_size,
                                    name="brainstream-read-standby", dsn=standby_dsn,
                                    wait_open=False, wait_seconds=STANDBY_WAIT_SECONDS,
                                    statement_timeout=settings.api_statement_timeout)
    monitor = StandbyMonitor(settings.effective_postgres_dsn, standby_dsn,
                             max_lag=settings.postgres_read_max_lag)
    router = ReadRouter(primary, floors, standby=standby, monitor=monitor)
    await router.start()
    return router


def freeze_startup_heap() -> None:
    """Put what the process built to serve (modules, adapters, caches) out of the garbage
    collector's reach (`gc.freeze`): a full collection otherwise walks that whole heap, and a
    request that allocates much (a sorted answer stores 1,000 items) paid 40-90 ms for one now
    and then. Call it once the services are built; what requests allocate is still collected."""
    gc.freeze()


def lexical_channels(index: TantivySearcher) -> list[Channel]:
    """BM25 and near-spellings on the generation's Tantivy indexes (LEXICAL_ENGINE=tantivy);
    queries are analysed by Postgres (`PgPartSearcher.query_lexemes`), as the indexed text
    was."""
    return [LexicalChannel(index), FuzzyChannel(index)]
