"""Embedders: the `Embedder` port and its adapters (static, MiniLM, OpenAI-compatible HTTP).

Adapters import their heavy dependencies (wordllama, torch) lazily, on first use.
"""

from __future__ import annotations

from pipeline.domain.errors import ConfigError
from pipeline.embedding.embedders.base import normalize_rows
from pipeline.embedding.embedders.http import HttpEmbedder
from pipeline.embedding.embedders.minilm import MINILM_DIM, MiniLMEmbedder
from pipeline.embedding.embedders.static import STATIC_DIM, StaticEmbedder
from pipeline.embedding.settings import EmbeddingSettings
from pipeline.openai_compat import retry_policy, secret
from pipeline.ports import Embedder, Vectors

__all__ = [
    "MINILM_DIM",
    "STATIC_DIM",
    "Embedder",
    "HttpEmbedder",
    "MiniLMEmbedder",
    "StaticEmbedder",
    "Vectors",
    "build_embedder",
    "build_name_embedder",
    "name_vector_dim",
    "normalize_rows",
    "same_name_embedder",
]


def build_embedder(settings: EmbeddingSettings, *, num_threads: int | None = None) -> Embedder:
    """The embedder the settings choose; bad or missing settings raise ConfigError.

    `num_threads` only affects MiniLM (see `MiniLMEmbedder`).
    """
    dim = settings.vector_dim  # raises ConfigError for http without BRAINSTREAM_EMBEDDING_DIM
    if settings.embedder == "http":
        if not settings.embedder_url:
            raise ConfigError(
                "BRAINSTREAM_EMBEDDER_URL must be set when BRAINSTREAM_EMBEDDER=http",
                field="embedder_url",
            )
        return HttpEmbedder(settings.embedder_url, dim=dim, model=settings.embedder_model,
                            api_key=secret(settings.embedder_api_key),
                            retry=retry_policy())
    native = MINILM_DIM if settings.embedder == "minilm" else STATIC_DIM
    if dim != native:
        # The vector columns are sized from vector_dim: a mismatch would fail on every write.
        raise ConfigError(
            f"BRAINSTREAM_EMBEDDING_DIM is {dim} but the {settings.embedder} embedder "
            f"produces {native}",
            field="embedding_dim",
        )
    if settings.embedder == "minilm":
        return MiniLMEmbedder(num_threads=num_threads)
    return StaticEmbedder()


def name_vector_dim(settings: EmbeddingSettings) -> int:
    """The dimension of entity name vectors (`ENTITY_NAME_EMBEDDER`)."""
    return STATIC_DIM if settings.entity_name_embedder == "static" else settings.vector_dim


def same_name_embedder(settings: EmbeddingSettings) -> bool:
    """Whether entity names are embedded by the passages' embedder itself."""
    return settings.entity_name_embedder == "passage" or settings.embedder == "static"


def build_name_embedder(settings: EmbeddingSettings, *, passages: Embedder | None = None,
                        num_threads: int | None = None) -> Embedder:
    """The embedder of entity names: `passages` (or a new passage embedder) when names use the
    passages' model, else the static embedder."""
    if same_name_embedder(settings):
        return passages if passages is not None else build_embedder(settings,
                                                                    num_threads=num_threads)
    return StaticEmbedder()
