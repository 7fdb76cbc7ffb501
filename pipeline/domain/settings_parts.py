"""Groups of settings that `Settings` (pipeline/domain/settings.py) inherits, kept apart so that
one module does not outgrow the layout's 400 lines: the path search's bounds, conversation
memory's, the lexical index's, the OpenAI-compatible HTTP client's, PPR's and the operator
console's. They are read exactly like the others (`BRAINSTREAM_*`, `.env`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr


def local_http_url(host: str, port: int) -> str:
    """The URL a client on this machine reaches a server bound to `host`:`port` by (a wildcard
    bind on loopback; an IPv6 address in brackets): `up` asking the API whether it answers,
    the MCP server's default API address."""
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class PathSettings(BaseModel):
    """`POST /v1/paths`."""

    # Paths (issue 11 item 5, POST /v1/paths; docs/entities.md). The search's bounds: the
    # most hops a request may ask (at most 4), paths per answer, endpoints per side, nodes and
    # edges explored, seconds before it stops; hubs (entities named in more than
    # PATHS_HUB_FRACTION of the namespace's live rows, and in at least PATHS_HUB_MIN_PARTS) are
    # not expanded; with no path within max_hops it goes on PATHS_BEYOND_HOPS more to tell
    # connected_beyond_max_length from not_connected; PATHS_MAX_ENUMERATED caps the paths
    # ranked; PATHS_EVIDENCE_PER_EDGE citations per edge.
    paths_max_hops: int = Field(default=4, ge=1, le=4)
    paths_max_k: int = Field(default=20, ge=1, le=100)
    paths_max_endpoints: int = Field(default=50, ge=1, le=1000)
    paths_max_nodes: int = Field(default=5000, ge=2, le=1_000_000)
    paths_max_edges: int = Field(default=20000, ge=1, le=1_000_000)
    paths_deadline: float = Field(default=5.0, gt=0, le=300)
    paths_hub_fraction: float = Field(default=0.1, gt=0, le=1)
    paths_hub_min_parts: int = Field(default=20, ge=1)
    paths_beyond_hops: int = Field(default=4, ge=0, le=16)
    paths_max_enumerated: int = Field(default=2000, ge=1, le=1_000_000)
    paths_evidence_per_edge: int = Field(default=3, ge=1, le=20)


class MemorySettings(BaseModel):
    """Conversation memory: reads, writes, retention, extractors, summaries, search."""

    # Conversation memory (issue 12; docs/memory.md). The window: messages after the
    # summary point that GET memory returns, and past which the summariser folds the oldest.
    memory_window: int = Field(default=12, ge=2, le=1000)
    # The most messages GET memory (`lastn`) and one page of GET messages may return, and the
    # most sessions one page of GET sessions lists.
    memory_lastn_max: int = Field(default=1000, ge=1, le=100_000)
    memory_page_max: int = Field(default=1000, ge=1, le=100_000)
    # How long POST messages with `wait: true` waits for its messages to be stored before it
    # answers 202 (below the request deadline, API_REQUEST_TIMEOUT).
    memory_write_wait: float = Field(default=5.0, gt=0, le=60)
    # `brainstream memory purge` (and `brainstream purge`) hard-delete soft-deleted sessions, and
    # messages hidden by a delete, this long (days) after their deletion.
    memory_retention_days: float = Field(default=30.0, ge=0)

    # Conversation memory: extractors, summaries, memory search (docs/memory.md;
    # the window, `memory_window`, is above).
    # The most messages one fold summarises; a larger backlog folds in several steps.
    memory_summary_max_step: int = Field(default=64, ge=1, le=10_000)
    memory_summary_budget_tokens: int = Field(default=256, ge=16, le=8192)
    summariser: Literal["extractive", "http"] = "extractive"
    summariser_url: str | None = None
    summariser_model: str | None = None
    summariser_timeout: float = Field(default=60.0, gt=0, le=3600)
    memory_extract_batch_size: int = Field(default=64, ge=1, le=4096)
    memory_extract_lease_seconds: float = Field(default=120.0, gt=0)
    memory_extract_retry_attempts: int = Field(default=5, ge=1, le=100)
    memory_extract_retry_max_wait: float = Field(default=10.0, gt=0)
    # Memory search: the most hits, neighbouring turns per hit, and `where` conditions.
    memory_search_max_limit: int = Field(default=100, ge=1, le=1000)
    memory_search_max_context: int = Field(default=10, ge=0, le=100)
    memory_search_max_conditions: int = Field(default=20, ge=1, le=200)
    memory_search_max_sessions: int = Field(default=1000, ge=1, le=100_000)

    # Memory search fusion (issue 12; docs/memory.md has the table behind the
    # defaults): candidates per channel, RRF's k, and the weight of the dense channels against
    # lexical's 1 (1 with k 60 is the object search's equal fusion, which let a weak dense
    # channel pull memory search below lexical alone).
    memory_search_candidates: int = Field(default=40, ge=1, le=1000)
    memory_search_rrf_k: int = Field(default=10, ge=0, le=10_000)
    memory_search_dense_weight: float = Field(default=0.5, gt=0, le=10)

    # Memory recall (issue 12, task D; docs/operations.md): what a message is indexed
    # by. Lexical search reads it with the MEMORY_LEXICAL_CONTEXT_TURNS turns before it, the
    # embedder gets it with the MEMORY_DENSE_CONTEXT_TURNS before it (1 suits MiniLM, the default
    # embedder; 2 the static one); MEMORY_CONTEXT_DATE puts its date into the lexical text
    # ("lexical"), both texts, or neither. A change applies to messages extracted from then on
    # (`brainstream replay` re-indexes the others).
    memory_lexical_context_turns: int = Field(default=2, ge=0, le=10)
    memory_dense_context_turns: int = Field(default=1, ge=0, le=10)
    memory_context_date: Literal["none", "lexical", "both"] = "lexical"


class LexicalSettings(BaseModel):
    """The lexical index on Tantivy: which engine answers, the writer, fuzzy terms, readers."""

    # The lexical index on Tantivy (issue 13 item 1; pipeline/lexical/, docs/lexical.md).
    # LEXICAL_ENGINE: which engine answers the lexical channel (and near-spellings: the trigram
    # channel on postgres, fuzzy term queries on tantivy); the index is kept either way, so the
    # switch needs no rebuild. Tantivy by default: search at 100k parts p95 21-26 ms, where the
    # SQL BM25 channel alone is p95 320 ms (docs/operations.md). The writer applies
    # LEXICAL_BATCH_SIZE queued roots per commit with LEXICAL_WRITER_HEAP_BYTES of indexing
    # memory. Fuzzy: query words of at least
    # LEXICAL_FUZZY_MIN_CHARS characters the index does not know, within
    # LEXICAL_FUZZY_DISTANCE edits (transpositions count one). Readers keep at most
    # LEXICAL_OPEN_INDEXES namespaces' indexes open (least recently searched closed first).
    lexical_engine: Literal["postgres", "tantivy"] = "tantivy"
    lexical_batch_size: int = Field(default=500, ge=1, le=100_000)
    lexical_writer_heap_bytes: int = Field(default=50_000_000, ge=15_000_000, le=4_000_000_000)
    lexical_fuzzy_distance: int = Field(default=1, ge=1, le=2)
    lexical_fuzzy_min_chars: int = Field(default=4, ge=1, le=64)
    lexical_open_indexes: int = Field(default=256, ge=1, le=100_000)

class ModelHttpSettings(BaseModel):
    """The OpenAI-compatible HTTP client shared by the http embedder, entity extractor and
    summariser (pipeline/openai_compat/, docs/architecture.md)."""

    # Review mends (task E): the bearer keys the embedder and the summariser had no setting for
    # (the extractor's is ENTITY_HTTP_API_KEY), and the retries inside one request. The stages
    # already retry whole batches (EMBED_RETRY_*, EXTRACT_RETRY_*, MEMORY_EXTRACT_RETRY_*), so
    # one attempt per request is the default; more multiply with those, and the API's query
    # embedder answers lexical-only only after them.
    embedder_api_key: SecretStr | None = None
    summariser_api_key: SecretStr | None = None
    model_http_retry_attempts: int = Field(default=1, ge=1, le=10)
    model_http_retry_max_wait: float = Field(default=2.0, gt=0, le=60)


class PprSettings(BaseModel):
    """PPR retrieval's seeds, walk bounds, iteration and fusion (`mode` ppr / auto)."""

    # PPR retrieval (issue 11, item 4; docs/entities.md): search `mode` ppr / auto. Seeds are
    # query n-grams of up to PPR_MAX_NGRAM words matched to entities; an entity named by more
    # than PPR_HUB_FRACTION of a namespace's live rows (and more than PPR_HUB_MIN_ROWS) is a hub:
    # never a seed, never expanded. The query-time subgraph: at most PPR_MAX_HOPS hops,
    # PPR_MAX_NODES nodes, PPR_MAX_EDGES edges, PPR_ROWS_PER_ENTITY rows read per entity, and
    # from the second hop the PPR_FRONTIER nodes with the best forward-push estimate (pushes
    # stop below PPR_PUSH_EPSILON) expanded per hop. Power iteration: PPR_DAMPING, at most
    # PPR_MAX_ITERATIONS, stopped when the top PPR_STABLE_K rows stayed put PPR_STABLE_ROUNDS
    # rounds or the L1 change fell below nodes x PPR_TOLERANCE. PPR re-ranks the hybrid list's best
    # PPR_RERANK_DEPTH objects (0: RRF of both lists, k PPR_RRF_K). PPR_PASSAGE_SEEDS x _WEIGHT:
    # the hybrid list's best rows as weak seeds (0: off; 0.05 keeps SciFact within 0.005 of
    # hybrid, 30 rows: HotpotQA R@5 +0.005 to +0.03; bench/multihop.py, docs/entities.md).
    ppr_max_ngram: int = Field(default=8, ge=1, le=16)
    ppr_hub_fraction: float = Field(default=0.10, gt=0, le=1)
    ppr_hub_min_rows: int = Field(default=20, ge=0, le=1_000_000)
    ppr_max_hops: int = Field(default=3, ge=1, le=3)
    ppr_max_nodes: int = Field(default=2000, ge=10, le=100_000)
    ppr_max_edges: int = Field(default=8000, ge=10, le=1_000_000)
    ppr_rows_per_entity: int = Field(default=100, ge=1, le=10_000)
    ppr_frontier: int = Field(default=64, ge=1, le=10_000)
    ppr_push_epsilon: float = Field(default=1e-4, gt=0, le=1)
    ppr_damping: float = Field(default=0.5, gt=0, lt=1)
    ppr_max_iterations: int = Field(default=50, ge=1, le=1000)
    ppr_tolerance: float = Field(default=1e-6, gt=0, le=1)
    ppr_stable_k: int = Field(default=20, ge=1, le=1000)
    ppr_stable_rounds: int = Field(default=3, ge=0, le=100)
    ppr_rrf_k: int = Field(default=5, ge=0, le=10_000)
    ppr_passage_seeds: int = Field(default=30, ge=0, le=100)
    ppr_passage_seed_weight: float = Field(default=0.05, ge=0, le=10)
    ppr_rerank_depth: int = Field(default=0, ge=0, le=1000)
    # PPR_DEGREE_NORMALISED: a row's PPR score is the mass its edges bring it per unit of its
    # degree (PPR's degree bias removed; ppr.inflow_per_degree). PPR_LIST_WEIGHT: the PPR
    # list's vote in the RRF with the hybrid list (whose vote is 1). Measured together:
    # HotpotQA auto R@5 0.860 -> 0.890 (static; 0.885 MiniLM), SciFact within 0.005
    # (docs/entities.md, "Third round").
    ppr_degree_normalised: bool = True
    ppr_list_weight: float = Field(default=0.8, gt=0, le=10)
    # PPR snapshot (issue 11, task A; docs/operations.md): PPR_WALK=snapshot walks an
    # in-memory snapshot of the namespace's entity layer per API process (sql: every hop is a
    # statement, as before). A snapshot answers only when its last refresh read started at most
    # PPR_SNAPSHOT_MAX_AGE seconds ago (the SQL walk answers otherwise): a write committed at T
    # is walked by every search after T + MAX_AGE. At most PPR_SNAPSHOT_MAX_NAMESPACES snapshots
    # and PPR_SNAPSHOT_MAX_BYTES (estimated) per process, least recently used out. The sweep
    # prunes the change log (migration 0029) after PPR_SNAPSHOT_LOG_RETENTION seconds; a process
    # that has not read it for half that long rebuilds its snapshots. A build's statements may
    # run PPR_SNAPSHOT_BUILD_TIMEOUT seconds (the API's statement timeout is for requests).
    ppr_walk: Literal["snapshot", "sql"] = "snapshot"
    ppr_snapshot_max_age: float = Field(default=5.0, ge=0.2, le=3600)
    ppr_snapshot_max_namespaces: int = Field(default=64, ge=1, le=100_000)
    ppr_snapshot_max_bytes: int = Field(default=1 << 30, ge=1 << 20, le=1 << 40)
    ppr_snapshot_log_retention: float = Field(default=3600.0, ge=60, le=30 * 86400)
    ppr_snapshot_build_timeout: float = Field(default=300.0, gt=0, le=86400)


class ConsoleSettings(BaseModel):
    """`brainstream up`'s console, its processes' log files, and its workers' start-up."""

    # Operator console (issue 15 item 4; docs/operations.md). `up` collects `brainstream
    # status` every CONSOLE_STATUS_INTERVAL seconds for its status line (redrawn in place on a
    # terminal); when its output is not a terminal it prints the line only when it changed, and
    # at most once per CONSOLE_LINE_INTERVAL seconds. Each pipeline process's output goes to
    # DATA_DIR/logs/<process>.log, rotated at LOG_MAX_BYTES with LOG_BACKUPS older files kept.
    # A worker's pool process loads its embedder before it takes work, and may take
    # WORKER_START_TIMEOUT seconds to do so (Celery kills one that is not up by then).
    console_status_interval: float = Field(default=2.0, ge=0.2, le=3600)
    console_line_interval: float = Field(default=30.0, ge=0, le=86400)
    log_max_bytes: int = Field(default=10 << 20, ge=1024, le=1 << 40)
    log_backups: int = Field(default=5, ge=1, le=1000)
    worker_start_timeout: float = Field(default=120.0, ge=4, le=3600)


class SurfaceSettings(BaseModel):
    """The agent and human surfaces: the MCP server, the publish endpoint, the web explorer."""

    # MCP server and POST /v1/events (issue 15 item 1; docs/operations.md): events per request;
    # the API `brainstream mcp` calls (None: this API_HOST/API_PORT), its key over stdio (and
    # the namespace, for a key with several), and seconds per API call.
    api_events_max: int = Field(default=500, ge=1, le=100_000)
    mcp_api_url: str | None = None
    mcp_api_key: SecretStr | None = None
    mcp_namespace: str | None = None
    mcp_api_timeout: float = Field(default=60.0, gt=0, le=3600)
    # Web explorer's operator page (issue 15 item 2, docs/operations.md): the keys that may read
    # GET /v1/admin/status (every tenant's backlogs: never give one to a tenant), and the most
    # dead letters that answer lists (oldest first).
    api_admin_keys: list[str] = Field(default_factory=list)
    ui_dead_letters_max: int = Field(default=200, ge=1, le=10_000)


class TopicSettings(BaseModel):
    """The Kafka topics the pipeline owns (pipeline/kafka/topics.py)."""

    # The input and dead-letter topics get TOPIC_PARTITIONS, the changes topic a count of its
    # own; one each by default. The embedded broker's store writes each partition of a produce
    # request apart: the relay's flush of 30 change events took 27 ms over four partitions
    # against 8 ms over one on a quiet machine; under bench/ingest.py's half load a publisher's
    # acknowledgement took p99 1.0-1.8 s on a one-partition input topic against 2.1-2.2 s on
    # four. A partition is the unit of parallel consumption: a deployment that will run N
    # consumers (or subscribers) sets N before the topics are first created.
    topic_partitions: int = Field(default=1, ge=1, le=256)
    topic_changes_partitions: int = Field(default=1, ge=1, le=256)
    topic_events: str = "brainstream.events"
    topic_dlq: str = "brainstream.events.dlq"
    topic_changes: str = "brainstream.changes"


class EntityNameSettings(BaseModel):
    """The model of entity name vectors (pipeline/embedding/embedders/__init__.py:
    `build_name_embedder`): the resolver's embedding layer and the proposal pass's kNN."""

    # `static` (default): the static embedder, whatever EMBEDDER is; `passage`: the passages'
    # embedder. A name is a few words; with MiniLM for passages, embedding each new name with
    # MiniLM cost 8.0 of 61 CPU-seconds on 200 SciFact documents (docs/performance.md).
    entity_name_embedder: Literal["static", "passage"] = "static"


class SettingsParts(TopicSettings, PathSettings, MemorySettings, LexicalSettings,
                    ModelHttpSettings, PprSettings, ConsoleSettings, SurfaceSettings,
                    EntityNameSettings):
    """Every group above, inherited by `Settings` as one."""
