"""Search's optional second stage: a reranker over the fused list's best objects.

`stage.py` is the stage (which texts, the time budget, the new order, `rerank_skipped`);
`http.py` the one adapter of the `Reranker` port (an HTTP `/rerank` server). Configured by the
`RERANKER` setting (`RerankerSettings`); without it searches are not re-ranked.
"""

from __future__ import annotations

from pipeline.openai_compat import secret
from pipeline.retrieval.rerank.http import HttpReranker
from pipeline.retrieval.rerank.stage import RERANK_SKIPPED, Reranked, RerankStage
from pipeline.retrieval.settings import RerankerSettings

__all__ = ["RERANK_SKIPPED", "HttpReranker", "RerankStage", "Reranked", "rerank_stage"]


def rerank_stage(settings: RerankerSettings | None) -> RerankStage | None:
    """The stage the `RERANKER` setting describes (None: not set); a bad URL is ConfigError."""
    if settings is None:
        return None
    reranker = HttpReranker(settings.url, model=settings.model,
                            api_key=secret(settings.api_key), field=settings.field,
                            timeout=settings.timeout)
    return RerankStage(reranker, depth=settings.depth, budget=settings.timeout)
