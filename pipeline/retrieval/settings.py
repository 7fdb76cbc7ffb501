"""The read side's settings: recency in ranking, result sets, expand recipes, and how PPR walks
the entity layer."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from pipeline.domain.setting_values import parse_json_object


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

    @field_validator("expand_recipes", mode="before")
    @classmethod
    def _recipes_json(cls, value: object) -> object:
        return parse_json_object(value)
