"""The embedders' settings: which model embeds passages and queries, where an HTTP one is, how
the embedding stage batches and leases its work, and which model embeds entity names."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from pipeline.domain.errors import ConfigError

EmbedderName = Literal["minilm", "static", "http"]

# Dimensions of the shipped embedders; an `http` embedder must state its own.
KNOWN_EMBEDDING_DIMS: dict[str, int] = {"minilm": 384, "static": 256}


class EmbeddingSettings(BaseModel):
    """The passage and query embedder, the stage's batches, the name embedder."""

    embedder: EmbedderName = Field(
        default="minilm", description="The model of passages and queries: `minilm` "
        "(all-MiniLM-L6-v2, 384 dims, CPU), `static` (wordllama, 256 dims, fast), `http` (an "
        "OpenAI-compatible `/v1/embeddings` server). A change takes a replay.")
    embedder_url: str | None = Field(
        default=None, description="The `http` embedder's base URL (`.../v1`). Set it with "
        "EMBEDDER=http.")
    embedder_model: str | None = Field(
        default=None, description="The model name the `http` embedder asks for. Set it with "
        "EMBEDDER=http.")
    embedding_dim: int | None = Field(
        default=None, ge=1, le=16000, description="The `http` model's dimension (the vector "
        "columns are sized from it). Required with EMBEDDER=http.")
    embedder_api_key: SecretStr | None = Field(
        default=None, description="The `http` embedder's bearer key. Set it when the server "
        "needs one.")
    embed_batch_size: int = Field(
        default=64, ge=1, le=4096, description="Rows the embedding stage claims and embeds at "
        "once. Raise it for a GPU or HTTP embedder that is faster in larger batches.")
    embed_lease_seconds: float = Field(
        default=120.0, gt=0, description="How long a claimed batch is a worker's before "
        "another may take it (a killed worker's rows wait this long). Raise it when one batch "
        "can take longer (a slow model server).")
    entity_name_embedder: Literal["static", "passage"] = Field(
        default="static", description="The model of entity name vectors (resolution's "
        "embedding layer): `static`, or `passage` (the passages' embedder: better for an `http` "
        "model, about an eighth of MiniLM's ingest CPU).")

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
