"""A reranker that calls an HTTP `/rerank` endpoint (the `Reranker` port's adapter).

Request: POST `{"query": ..., "documents": [...]}` (Cohere, Jina, vLLM; with `model` when set)
or `{"query": ..., "texts": [...], "truncate": true}` (text-embeddings-inference, which refuses
a text longer than its model reads unless told to truncate). Answer, whichever server: a list
of `{"index", "score"}` (text-embeddings-inference) or `{"results": [{"index",
"relevance_score"}]}` (Cohere, Jina, vLLM); every text must be scored once. The HTTP side (URL
check, bearer key, which failures are `RerankerUnavailable` and which `RerankerError`) is the
shared OpenAI-compatible client's (`pipeline.openai_compat`); messages name the endpoint with
its credentials masked, never the key.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from typing import Any, Literal

from pipeline.domain.errors import RerankerError, RerankerUnavailable
from pipeline.domain.setting_values import redact_credentials
from pipeline.openai_compat import NO_RETRY, CallerErrors, OpenAICompatClient, excerpt

ERRORS = CallerErrors("reranker", "reranker", RerankerUnavailable, RerankerError)
RequestField = Literal["documents", "texts"]


class HttpReranker:
    """Client of one `/rerank` server. Create it in the process that uses it: it owns a pooled
    HTTP client, used from a worker thread (one request per search)."""

    def __init__(self, url: str, *, model: str | None = None, api_key: str | None = None,
                 field: RequestField = "documents", timeout: float = 1.0) -> None:
        """`url` is the base (`.../v1`) or the `/rerank` route; `model` is sent as given
        (omitted when None); `api_key` becomes a bearer token; `timeout` bounds the HTTP call
        (the stage's own budget bounds the wait)."""
        # No retry inside a search: the caller is waiting, and the fused order is an answer.
        self._client = OpenAICompatClient(url, "rerank", ERRORS, model=model, api_key=api_key,
                                          timeout=timeout, retry=NO_RETRY)
        self.field = field
        self.endpoint = redact_credentials(self._client.endpoint)

    def close(self) -> None:
        """Close the pooled connections."""
        self._client.close()

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One score per text, in input order."""
        if not texts:
            return []
        payload: dict[str, Any] = {"query": query, self.field: list(texts)}
        if self.field == "texts":
            payload["truncate"] = True
        try:
            body = await asyncio.to_thread(self._client.post, payload)
        except (RerankerUnavailable, RerankerError) as exc:
            # the client's message quotes the endpoint as configured: mask what it carries
            raise type(exc)(redact_credentials(exc.message)) from None
        return self._scores(body, len(texts))

    def _scores(self, body: Any, count: int) -> list[float]:
        """The scores of a 200 answer, placed by `index`; anything off-contract is a
        RerankerError."""
        where = f"reranker {self.endpoint}"
        results = body.get("results") if isinstance(body, dict) else body
        if not isinstance(results, list):
            raise RerankerError(f"{where} returned no result list: {excerpt(json.dumps(body))}")
        scores: list[float | None] = [None] * count
        for item in results:
            index = item.get("index") if isinstance(item, dict) else None
            score = (item.get("relevance_score", item.get("score"))
                     if isinstance(item, dict) else None)
            if type(index) is not int or not 0 <= index < count or scores[index] is not None:
                raise RerankerError(f"{where} returned a missing, duplicate or bad index "
                                    f"{index!r}")
            if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(
                    score):
                raise RerankerError(f"{where} returned no finite score for index {index}")
            scores[index] = float(score)
        missing = [i for i, s in enumerate(scores) if s is None]
        if missing:
            raise RerankerError(f"{where} scored {count - len(missing)} of {count} texts")
        return [s for s in scores if s is not None]
