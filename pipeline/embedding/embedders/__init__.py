"""Embedders: the `Embedder` port and its adapters (static, MiniLM, OpenAI-compatible HTTP).

Adapters import their heavy dependencies (wordllama, torch) lazily, on first use.
"""

from __future__ import annotations

from pipeline.domain.errors import ConfigError
from pipeline.domain.settings import Settings
from pipeline.embedding.embedders.base import normalize_rows
from pipeline.embedding.embedders.http import HttpEmbedder
from pipeline.embedding.embedders.minilm import MINILM_DIM, MiniLMEmbedder
from pipeline.embedding.embedders.static import STATIC_DIM, StaticEmbedder
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
    "normalize_rows",
]


def build_embedder(settings: Settings, *, num_threads: int | None = None) -> Embedder:
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
                            retry=retry_policy(settings))
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
