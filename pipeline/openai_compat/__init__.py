"""The one client of OpenAI-compatible HTTP endpoints (`/embeddings`, `/chat/completions`),
shared by the http embedder, the http entity extractor and the http summariser."""

from __future__ import annotations

from pipeline.openai_compat.client import (
    NO_RETRY,
    CallerErrors,
    OpenAICompatClient,
    RetryPolicy,
    excerpt,
    retry_policy,
    secret,
)

__all__ = ["NO_RETRY", "CallerErrors", "OpenAICompatClient", "RetryPolicy", "excerpt",
           "retry_policy", "secret"]
