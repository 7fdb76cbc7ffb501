"""Every setting, read once from `BRAINSTREAM_*` environment variables and `.env`.

Each wing owns its group (`pipeline/<wing>/settings.py`) and its code receives that group; the
one `Settings` below is all of them together, read by the composition layer (the CLI, `up`, the
wiring, the operator commands and the shells), which hands each service its group. The groups of
the processes themselves (workers, the API server, the MCP server) are defined here: the code
that reads them is that layer. Names are part of the product's interface: never rename one
without keeping the old name working through `validation_alias`. docs/operations.md lists every
setting (generated from the descriptions: `make docs`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.access import ApiKey, parse_api_keys
from pipeline.domain.errors import ConfigError
from pipeline.domain.setting_values import (
    check_allowed_hosts,
    check_allowed_origins,
    parse_json_object,
)
from pipeline.embedding.settings import EmbeddingSettings
from pipeline.entities.settings import EntitySettings
from pipeline.ingest.settings import IngestSettings
from pipeline.kafka.settings import KafkaSettings
from pipeline.lexical.settings import LexicalSettings
from pipeline.memory.settings import MemorySettings
from pipeline.outbox.settings import RelaySettings
from pipeline.retrieval.settings import RetrievalSettings
from pipeline.services.settings import StackSettings

log = logging.getLogger(__name__)

# The Postgres connections all API processes together may hold (the embedded Postgres allows 300;
# the rest are the pipeline's). Against a server that allows fewer, run fewer API_WORKERS.
API_CONNECTION_BUDGET = 200
# One API process's read pool, at most (fewer when API_WORKERS processes would pass the budget).
API_POOL_MAX = 8
# A worker's pool process loads its embedder before it takes work (MiniLM: about 13 s on two
# cores): Celery kills one that has not reported by then, and `up` says it waits for them.
WORKER_START_TIMEOUT = 120.0


class ProcessSettings(BaseModel):
    """The workers' processes, metrics ports, and `brainstream up`'s logs and console."""

    worker_concurrency: int = Field(
        default=2, ge=1, le=256, description="Pool processes of one embedding worker. Set it to "
        "the cores a worker host gives embedding.")
    sweep_interval: float = Field(
        default=5.0, gt=0, description="Seconds between sweeps (lost triggers re-sent, due "
        "deferred events applied, vocabulary refreshed). Raise it to poll a large database "
        "less often; work whose trigger was lost waits up to twice this.")
    consumer_metrics_port: int = Field(
        default=9101, ge=0, le=65535, description="The consumer's Prometheus port (0: none). "
        "Change it when the port is taken.")
    worker_metrics_port: int = Field(
        default=9102, ge=0, le=65535, description="The embedding worker's Prometheus port (`up` "
        "gives the relay and extract workers the next two; 0: none). Change it as above.")
    log_max_bytes: int = Field(
        default=10 << 20, ge=1024, le=1 << 40, description="Size at which `up` rotates a "
        "process's log file (five older files kept). Size it to the disk.")
    console_line_interval: float = Field(
        default=30.0, ge=0, le=86400, description="When `up`'s output is not a terminal, the "
        "status line is printed when it changes, at most once per this many seconds. Raise it "
        "for quieter service logs.")


class ApiSettings(BaseModel):
    """The read API's address, keys, processes and request limits."""

    api_host: str = Field(default="127.0.0.1", description="The API's bind address. Keep "
                          "loopback behind a TLS proxy; `0.0.0.0` only inside a container.")
    api_port: int = Field(default=8000, ge=1, le=65535, description="The API's port. Change "
                          "it when the port is taken.")
    api_keys: dict[str, ApiKey] = Field(
        default_factory=dict, description="JSON: API key -> `{\"name\", \"scopes\": "
        "{namespace: [read|write|admin]}, \"operator\"}` (or a list of namespaces: read only). "
        "Set it before anyone but you calls the API (`up` prints a development key without it).")
    api_workers: int = Field(
        default_factory=lambda: os.cpu_count() or 1, ge=1, le=64, description="API processes "
        "(default: the cores). Lower it on a host shared with the pipeline.")
    api_max_body_bytes: int = Field(
        default=1_048_576, ge=1024, description="The largest request body; larger ones get 413. "
        "Raise it for large POST /v1/events batches.")
    api_request_timeout: float = Field(
        default=30.0, gt=0, description="Seconds a request may take: past it the answer is 503 "
        "`request_timeout` (408 `body_timeout` while its body still arrives). Lower it for "
        "interactive callers.")
    api_statement_timeout: float = Field(
        default=15.0, gt=0, description="Seconds one Postgres statement of a request may run. "
        "Keep it below API_REQUEST_TIMEOUT.")
    ui_dead_letters_max: int = Field(
        default=200, ge=1, le=10_000, description="The most dead letters the operator page "
        "(GET /v1/admin/status) lists, oldest first. Raise it to see further back.")

    @field_validator("api_keys", mode="before")
    @classmethod
    def _keys_json(cls, value: object) -> object:
        return parse_api_keys(parse_json_object(value))


class McpSettings(BaseModel):
    """`brainstream mcp`: the API it calls, and whom its HTTP transport answers."""

    mcp_api_url: str | None = Field(
        default=None, description="The API the MCP server calls (default: this API_HOST and "
        "API_PORT). Set it when the API runs elsewhere.")
    mcp_api_key: SecretStr | None = Field(
        default=None, description="The key the stdio MCP server calls the API with (the HTTP "
        "transport forwards each caller's). Set it for an agent's key.")
    mcp_namespace: str | None = Field(
        default=None, description="The namespace of a key bound to several. Set it with such "
        "a key.")
    mcp_allowed_hosts: list[str] | None = Field(
        default=None, description="JSON list: the Host headers the HTTP MCP server answers "
        "(`name`, `name:port`, or `name:*` for any port); any other is refused (421), against "
        "DNS rebinding. Default: the bind address and its loopback forms with --port. Set it to "
        "the public host name when a proxy forwards to it.")
    mcp_allowed_origins: list[str] | None = Field(
        default=None, description="JSON list: the Origin headers (`https://name[:port]`) the "
        "HTTP MCP server accepts from browsers; any other is refused (403). Default: the "
        "http:// and https:// origins of MCP_ALLOWED_HOSTS. Set it only for a browser client "
        "served from another origin.")

    @field_validator("mcp_allowed_hosts")
    @classmethod
    def _hosts(cls, value: list[str] | None) -> list[str] | None:
        return check_allowed_hosts(value)

    @field_validator("mcp_allowed_origins")
    @classmethod
    def _origins(cls, value: list[str] | None) -> list[str] | None:
        return check_allowed_origins(value)


class Settings(BaseSettings, IngestSettings, LexicalSettings, EmbeddingSettings, EntitySettings,
               RelaySettings, MemorySettings, RetrievalSettings, ProcessSettings, ApiSettings,
               McpSettings):
    """Every group together (IngestSettings includes the Kafka and stack groups)."""

    model_config = SettingsConfigDict(
        env_prefix="BRAINSTREAM_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        # a refused value is never repeated in an error: API_KEYS holds the API's secrets
        hide_input_in_errors=True,
    )

    @property
    def api_pool_size(self) -> int:
        """The read pool of one API process: API_POOL_MAX, or its share of the connection
        budget across API_WORKERS processes, each holding two generations' pools (a replay's
        switch keeps the old generation's open for its grace period) and one PPR snapshot
        build's connection; at least 2."""
        per_process = API_CONNECTION_BUDGET // self.api_workers
        return max(2, min(API_POOL_MAX, (per_process - 1) // 2))

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

    def for_generation(self, generation: int, *, dbname: str | None, graph_name: str,
                       consumer_group: str, embedder: str, embedding_dim: int) -> Self:
        """A copy addressing one index generation: its database, graph, consumer group and
        embedder (a generation may have been built with another model than the settings')."""
        return self.addressing(generation, dbname=dbname, consumer_group=consumer_group,
                               update={"graph_name": graph_name, "embedder": embedder,
                                       "embedding_dim": embedding_dim})


# The groups in the order the settings reference lists them, each with its own fields only.
GROUPS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("Stack", StackSettings), ("Kafka and events", KafkaSettings),
    ("Write path", IngestSettings), ("Embedding", EmbeddingSettings),
    ("Relay", RelaySettings), ("Entities", EntitySettings), ("Lexical index", LexicalSettings),
    ("Read side", RetrievalSettings), ("Conversation memory", MemorySettings),
    ("API", ApiSettings), ("MCP server", McpSettings), ("Processes", ProcessSettings),
)


def own_fields(group: type[BaseModel]) -> list[str]:
    """The settings a group declares itself (not those of the groups it extends)."""
    inherited = {name for base in group.__mro__[1:] if isinstance(base, type)
                 and issubclass(base, BaseModel) and base is not BaseModel
                 for name in base.model_fields}
    return [name for name in group.model_fields if name not in inherited]


PREFIX = "BRAINSTREAM_"
# BRAINSTREAM_* variables that are not settings: the Python client's, what `up` tells its
# children, and the test suite's and benchmarks' port offsets.
NOT_SETTINGS = frozenset({"BRAINSTREAM_API_URL", "BRAINSTREAM_API_KEY", "BRAINSTREAM_NAMESPACE",
                          "BRAINSTREAM_SUPERVISOR_PID", "BRAINSTREAM_API_PARENT_PID",
                          "BRAINSTREAM_TEST_PORT_OFFSET", "BRAINSTREAM_BENCH_PORT_OFFSET",
                          "BRAINSTREAM_WRITE_SCREENSHOTS"})


def dotenv_names(path: Path) -> set[str]:
    """The BRAINSTREAM_* names a `.env` file sets (upper case)."""
    from dotenv import dotenv_values

    if not path.is_file():
        return set()
    return {key.upper() for key in dotenv_values(path) if key.upper().startswith(PREFIX)}


def unknown_variables(environ: Mapping[str, str] | None = None,
                      dotenv: Path = Path(".env")) -> list[str]:
    """BRAINSTREAM_* variables that name no setting (a typo, or a setting since removed): they
    are ignored, so the processes and `brainstream config` say so."""
    known = {PREFIX + name.upper() for name in Settings.model_fields} | NOT_SETTINGS
    given = {key.upper() for key in (os.environ if environ is None else environ)
             if key.upper().startswith(PREFIX)} | dotenv_names(dotenv)
    return sorted(given - known)


# Settings folded into API_KEYS (the per-key limits are each key's own). Still set, they would be
# ignored and the keys they named would
# lose what they granted without a word: the processes refuse to start and say what to do.
REMOVED = {
    "BRAINSTREAM_API_ADMIN_KEYS": "give those keys \"operator\": true in BRAINSTREAM_API_KEYS",
    "BRAINSTREAM_ENTITY_CURATORS": "give those keys the admin scope in BRAINSTREAM_API_KEYS "
                                   "(their name is recorded as decided_by)",
    "BRAINSTREAM_API_MAX_CONCURRENT_PER_KEY": "set \"max_in_flight\" on the key's record in "
                                              "BRAINSTREAM_API_KEYS (default 8)",
}


def load_settings(**overrides: Any) -> Settings:
    """Read the settings once; a bad value becomes a ConfigError naming the variable. A variable
    that names no setting is logged: it would otherwise be ignored without a word; one of a
    removed setting (`REMOVED`) is a ConfigError saying what replaced it."""
    from pydantic import ValidationError

    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else "?"
        raise ConfigError(
            f"BRAINSTREAM_{name.upper()}: {first['msg']}", field=name
        ) from exc
    for name in unknown_variables():
        if name in REMOVED:
            raise ConfigError(f"{name} was removed: {REMOVED[name]} (docs/operations.md, "
                              "\"Security model\")", field=name.removeprefix(PREFIX).lower())
        log.warning("%s is not a setting: ignored (brainstream config lists them)", name)
    return settings
