"""The summarisers behind the `Summariser` port: `extractive` (the default, no model) and `http`
(an OpenAI-compatible chat-completions endpoint). Chosen by `BRAINSTREAM_SUMMARISER`.

The extractive summariser keeps whole sentences: each candidate (the previous summary's sentences
compete with the new turns') scores by its centrality under the pipeline's embedder (cosine to
the centroid of all candidates) plus its term weight (tf x idf of its content words), and the best
fill the token budget, near-repeats skipped, in conversation order.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.domain.chunking import count_tokens
from pipeline.domain.errors import ConfigError, Unavailable
from pipeline.domain.memory_errors import SummariserError
from pipeline.memory import summary_text as st
from pipeline.memory.ports import Summariser
from pipeline.memory.settings import MemorySettings
from pipeline.openai_compat import (
    NO_RETRY,
    CallerErrors,
    OpenAICompatClient,
    RetryPolicy,
    retry_policy,
    secret,
)
from pipeline.ports import Embedder

ERRORS = CallerErrors("summariser", "summariser_url", Unavailable, SummariserError)
_PROMPT = (
    "You maintain the running summary of a conversation. Merge the previous summary with the new "
    "lines into one concise summary in the third person that keeps names, dates, numbers, "
    "decisions and preferences. Answer with the summary text only, at most {budget} words."
)


class ExtractiveSummariser:
    """Salient sentences, chosen by centrality and term weights, within the token budget."""

    name = "extractive"

    def __init__(self, embedder: Embedder, *, centrality_weight: float = 0.5) -> None:
        if not 0.0 <= centrality_weight <= 1.0:
            raise ValueError("centrality_weight must be within [0, 1]")
        self.embedder = embedder
        self.centrality_weight = centrality_weight

    def summarise(self, previous: str | None, lines: Sequence[str], budget_tokens: int) -> str:
        """Embeds every candidate sentence once; an embedder outage raises `Unavailable`."""
        items = st.candidates(previous, lines)
        if not items:
            return previous or ""
        vectors = self.embedder.embed([c.text for c in items])
        central = st.centrality(vectors)
        terms = st.term_weights(items)
        w = self.centrality_weight
        scores = [w * c + (1.0 - w) * t for c, t in zip(central, terms, strict=True)]
        return " ".join(c.text for c in st.select(items, scores, vectors, budget_tokens))


class HttpSummariser:
    """Client of an OpenAI-compatible `/chat/completions` endpoint; the answer is cut to the
    budget (whole sentences) should the model run over it."""

    name = "http"

    def __init__(self, url: str, *, model: str | None = None, api_key: str | None = None,
                 timeout: float = 60.0, retry: RetryPolicy = NO_RETRY) -> None:
        """`model` is sent as given (omitted when None); `api_key` becomes a bearer token."""
        self._client = OpenAICompatClient(url, "chat/completions", ERRORS, model=model,
                                          api_key=api_key, timeout=timeout, retry=retry)
        self.endpoint = self._client.endpoint
        self.model = model

    def close(self) -> None:
        """Close the pooled connections."""
        self._client.close()

    def summarise(self, previous: str | None, lines: Sequence[str], budget_tokens: int) -> str:
        """One chat call; transport errors, 408, 429 and 5xx raise `Unavailable`."""
        user = (f"Previous summary:\n{previous or '(none)'}\n\nNew lines:\n" + "\n".join(lines))
        text = self._client.chat([
            {"role": "system", "content": _PROMPT.format(budget=budget_tokens)},
            {"role": "user", "content": user}])
        if not text.strip():
            raise SummariserError(f"summariser {self.endpoint} answered an empty summary")
        return _within_budget(text.strip(), budget_tokens)


def _within_budget(text: str, budget: int) -> str:
    """The leading whole sentences of `text` that fit `budget` tokens (the first, cut, if even
    it does not)."""
    kept: list[str] = []
    used = 0
    for sentence in st.sentences(text):
        n = count_tokens(sentence)
        if used + n > budget:
            break
        kept.append(sentence)
        used += n
    if kept:
        return " ".join(kept)
    words = text.split()
    return " ".join(words[:max(1, budget // 2)])


def build_summariser(settings: MemorySettings, embedder: Embedder) -> Summariser:
    """The summariser the settings choose; `http` without a URL raises ConfigError."""
    if settings.summariser == "http":
        if not settings.summariser_url:
            raise ConfigError("BRAINSTREAM_SUMMARISER_URL must be set when "
                              "BRAINSTREAM_SUMMARISER=http", field="summariser_url")
        return HttpSummariser(settings.summariser_url, model=settings.summariser_model,
                              api_key=secret(settings.summariser_api_key),
                              timeout=settings.summariser_timeout, retry=retry_policy())
    return ExtractiveSummariser(embedder)
