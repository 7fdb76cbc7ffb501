"""The lexical index's setting: which engine answers the lexical channel."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pipeline.services.settings import StackSettings


class LexicalSettings(StackSettings):
    """The lexical engine (the index lives under the stack's data directory)."""

    lexical_engine: Literal["postgres", "tantivy"] = Field(
        default="tantivy", description="Which engine answers the lexical channel and "
        "near-spellings: `tantivy` (the index beside Postgres; search p95 at 100k parts under "
        "30 ms) or `postgres` (SQL BM25 over postings, no files; about 20x slower at 100k). "
        "Change it to run without a writable data directory (then `migrate`).")
    lexical_replica_max_lag: float = Field(
        default=30.0, gt=0, description="Seconds this host's lexical replica may lag the change "
        "log before `/readyz` answers 503 (a host just started is not ready until its replica "
        "is built and within this). Raise it where bulk loads outrun indexing and every host "
        "would go unready together (`status` shows each replica's lag); lower it where "
        "searches on every host must find a write sooner.")
