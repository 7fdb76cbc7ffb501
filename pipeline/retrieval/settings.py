"""The read side's settings: recency in ranking, result sets, expand recipes, and how PPR walks
the entity layer."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from pipeline.domain.setting_values import parse_json_object


class RerankerSettings(BaseModel):
    """The search reranker: an HTTP `/rerank` server (text-embeddings-inference, Cohere, Jina,
    vLLM), given as one JSON object (`RERANKER`). Each key says when to change it."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="The server's base URL (`.../v1`, or the `/rerank` route "
                     "itself); credentials in it are masked wherever it is shown.")
    model: str | None = Field(default=None, description="The model name sent with each "
                              "request; set it when the server serves several (Cohere, Jina).")
    api_key: SecretStr | None = Field(default=None, description="A bearer key; set it when "
                                      "the server needs one. Never logged or shown.")
    field: Literal["documents", "texts"] = Field(
        default="documents", description="Where the texts go: `documents` (Cohere, Jina, "
        "vLLM) or `texts` (text-embeddings-inference).")
    depth: int = Field(default=20, ge=1, le=100, description="How many of the fused list's "
                       "best objects are re-ranked. Raise it when good answers sit lower; each "
                       "one costs the reranker a query-text pair.")
    timeout: float = Field(default=1.0, gt=0, le=30, description="Seconds the reranker may "
                           "take before the fused order is answered (`rerank_skipped`). Raise "
                           "it for a slow server; callers wait up to this much longer.")


class RetrievalSettings(BaseModel):
    """Ranking, result sets, recipes, PPR's walk."""

    decay_lambda: float = Field(
        default=0.002, ge=0, description="Temporal decay per day of age in ranking (0: none). "
        "Raise it where recent objects should win; 0 for archives.")
    result_set_ttl: int = Field(
        default=900, ge=10, le=86400, description="Seconds a result set (what `continue` pages "
        "through) is kept. Raise it for callers that page slowly.")
    # Result sets live in their own Redis database, never the Celery broker's: an eviction or a
    # FLUSHDB for result sets must not touch queued tasks.
    result_set_redis_db: int = Field(
        default=1, ge=0, le=15, description="The Redis database of result sets; must differ "
        "from REDIS_URL's. Change it when database 1 is taken.")
    expand_recipes: dict[str, dict[str, object]] = Field(
        default_factory=dict, description="JSON: name -> expand template, read-only defaults "
        "every namespace sees. Set it to give every tenant the same recipes.")
    ppr_walk: Literal["snapshot", "sql"] = Field(
        default="snapshot", description="How PPR walks the entity layer: an in-memory snapshot "
        "per namespace and API process (p95 about 30 ms at 100k parts), or SQL per hop (about "
        "12x slower, no memory). Use `sql` when API processes are short of memory.")
    ppr_snapshot_max_bytes: int = Field(
        default=1 << 30, ge=1 << 20, le=1 << 40, description="Memory (estimated) one API "
        "process gives all its PPR snapshots together, the one being built included; least "
        "recently used out, a namespace larger alone is walked in SQL. Each API worker has its "
        "own: size it to the API host's memory / API_WORKERS.")

    reranker: RerankerSettings | None = Field(
        default=None, description="JSON: an HTTP reranker over search's fused top objects "
        '(`{"url": ..., "model": ..., "api_key": ..., "field": "documents", "depth": 20, '
        '"timeout": 1.0}`; docs/search.md). Set it to re-rank every search by default.')

    @field_validator("reranker", mode="before")
    @classmethod
    def _reranker_json(cls, value: object) -> object:
        parsed = parse_json_object(value)
        return None if parsed == {} else parsed

    @field_validator("expand_recipes", mode="before")
    @classmethod
    def _recipes_json(cls, value: object) -> object:
        return parse_json_object(value)
