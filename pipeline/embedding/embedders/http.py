"""An embedder that calls an OpenAI-compatible `/embeddings` HTTP endpoint.

Contract: POST `{"model": ..., "input": [...]}`, answer `{"data": [{"index": i, "embedding":
[...]}, ...]}`. Inputs go in batches of at most `max_batch`; one failed batch fails the whole call
(the caller retries the call, so nothing is half-applied).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

import httpx
import numpy as np

from pipeline.domain.errors import ConfigError, EmbedderError, EmbedderUnavailable
from pipeline.embedding.embedders.base import empty_vectors, normalize_rows, text_list
from pipeline.ports import Vectors

# Statuses that say "try again later" rather than "this request is wrong".
_TRANSIENT_STATUSES = frozenset({408, 429})
_BODY_EXCERPT = 200


def embeddings_endpoint(url: str) -> str:
    """`url` if it already names the `/embeddings` route, else `url` + `/embeddings`."""
    base = url.rstrip("/")
    return base if base.endswith("/embeddings") else f"{base}/embeddings"


class HttpEmbedder:
    """Client of an OpenAI-compatible embeddings server; vectors are re-normalized locally.

    Create it in the process that uses it (after any fork): it owns a pooled `httpx.Client`.
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
    ) -> None:
        """`model` is sent as given (omitted when None); `api_key` becomes a bearer token."""
        if dim < 1:
            raise ValueError("dim must be at least 1")
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise ConfigError(
                f"embedder URL {url!r} is invalid: {exc}", field="embedder_url"
            ) from exc
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ConfigError(
                f"embedder URL {url!r} must be an absolute http(s) URL", field="embedder_url"
            )
        self.dim = dim
        self.model = model
        self.max_batch = max_batch
        self.endpoint = embeddings_endpoint(url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=httpx.Timeout(timeout), headers=headers)

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
        payload: dict[str, Any] = {"input": batch}
        if self.model is not None:
            payload["model"] = self.model
        try:
            response = self._client.post(self.endpoint, json=payload)
        except httpx.UnsupportedProtocol as exc:
            raise EmbedderError(f"embedder {self.endpoint}: {exc}") from exc
        except httpx.TransportError as exc:
            # Connect/read/write errors and timeouts: the server may be back soon.
            raise EmbedderUnavailable(
                f"embedder {self.endpoint} unreachable: {type(exc).__name__}: {exc}"
            ) from exc
        status = response.status_code
        if status in _TRANSIENT_STATUSES or status >= 500:
            raise EmbedderUnavailable(
                f"embedder {self.endpoint} answered {status}: {_excerpt(response)}"
            )
        if status != 200:
            raise EmbedderError(f"embedder {self.endpoint} answered {status}: {_excerpt(response)}")
        return self._parse(response, len(batch))

    def _parse(self, response: httpx.Response, count: int) -> Vectors:
        """The rows of a 200 answer, placed by `index`; anything off-contract is permanent."""
        where = f"embedder {self.endpoint}"
        try:
            body = response.json()
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError both are ValueErrors
            raise EmbedderError(f"{where} returned a body that is not JSON: {exc}") from exc
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise EmbedderError(f"{where} returned no 'data' list: {_excerpt(response)}")
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


def _excerpt(response: httpx.Response) -> str:
    """The start of the body, for messages (error bodies say what the server disliked)."""
    try:
        text = response.text
    except Exception:  # an undecodable body must not hide the status we are reporting
        return "<undecodable body>"
    text = " ".join(text.split())
    return text[:_BODY_EXCERPT] + ("..." if len(text) > _BODY_EXCERPT else "")
