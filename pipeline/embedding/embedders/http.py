"""An embedder that calls an OpenAI-compatible `/embeddings` HTTP endpoint.

Contract: POST `{"model": ..., "input": [...]}`, answer `{"data": [{"index": i, "embedding":
[...]}, ...]}`. Inputs go in batches of at most `max_batch`; one failed batch fails the whole call
(the caller retries the call, so nothing is half-applied). The HTTP side (URL, key, timeout,
retries, which failures are `EmbedderUnavailable` and which `EmbedderError`) is the shared
OpenAI-compatible client's (`pipeline.openai_compat`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import numpy as np

from pipeline.domain.errors import EmbedderError, EmbedderUnavailable
from pipeline.domain.setting_values import redact_credentials
from pipeline.embedding.embedders.base import empty_vectors, normalize_rows, text_list
from pipeline.openai_compat import NO_RETRY, CallerErrors, OpenAICompatClient, RetryPolicy, excerpt
from pipeline.ports import Vectors

ERRORS = CallerErrors("embedder", "embedder_url", EmbedderUnavailable, EmbedderError)


class HttpEmbedder:
    """Client of an OpenAI-compatible embeddings server; vectors are re-normalized locally.

    Create it in the process that uses it (after any fork): it owns a pooled HTTP client.
    """

    name = "http"

    def __init__(
        self,
        url: str,
        *,
        dim: int,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_batch: int = 64,
        retry: RetryPolicy = NO_RETRY,
    ) -> None:
        """`model` is sent as given (omitted when None); `api_key` becomes a bearer token."""
        if dim < 1:
            raise ValueError("dim must be at least 1")
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.dim = dim
        self.model = model
        self.max_batch = max_batch
        self._client = OpenAICompatClient(url, "embeddings", ERRORS, model=model,
                                          api_key=api_key, timeout=timeout, retry=retry)
        self.endpoint = self._client.endpoint
        # the server and the model it serves: the URL without credentials or query (a key
        # rotation is the same model); the server's weights are its to keep under one name
        self.identity = (f"http {redact_credentials(self.endpoint)} model={model or '-'} "
                         f"dim={dim} normalize=l2")

    def close(self) -> None:
        """Close the pooled connections."""
        self._client.close()

    def __enter__(self) -> HttpEmbedder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed `texts` in batches of `max_batch`; rows come back in input order."""
        items = text_list(texts)
        if not items:
            return empty_vectors(self.dim)
        parts = [
            self._embed_batch(items[start : start + self.max_batch])
            for start in range(0, len(items), self.max_batch)
        ]
        return normalize_rows(np.concatenate(parts, axis=0))

    def _embed_batch(self, batch: list[str]) -> Vectors:
        return self._parse(self._client.post({"input": batch}), len(batch))

    def _parse(self, body: Any, count: int) -> Vectors:
        """The rows of a 200 answer, placed by `index`; anything off-contract is permanent."""
        where = f"embedder {self.endpoint}"
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise EmbedderError(f"{where} returned no 'data' list: {excerpt(json.dumps(body))}")
        if len(data) != count:
            raise EmbedderError(f"{where} returned {len(data)} embeddings for {count} inputs")
        out = np.zeros((count, self.dim), dtype=np.float32)
        seen = [False] * count
        for item in data:
            index = item.get("index") if isinstance(item, dict) else None
            embedding = item.get("embedding") if isinstance(item, dict) else None
            if type(index) is not int or not 0 <= index < count or seen[index]:
                raise EmbedderError(f"{where} returned a missing, duplicate or bad index {index!r}")
            if not isinstance(embedding, list):
                raise EmbedderError(f"{where} returned no float list for index {index}")
            if len(embedding) != self.dim:
                raise EmbedderError(
                    f"{where} returned {len(embedding)}-dim vectors, configured dim is {self.dim}"
                )
            try:
                row = np.asarray(embedding, dtype=np.float32)
            except (TypeError, ValueError) as exc:
                raise EmbedderError(f"{where} returned non-numeric values at {index}") from exc
            if row.ndim != 1 or not np.isfinite(row).all():
                raise EmbedderError(f"{where} returned non-finite values at index {index}")
            out[index] = row
            seen[index] = True
        return out

