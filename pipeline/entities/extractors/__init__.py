"""Entity extractors: the `Extractor` port's adapters (heuristic, spaCy, OpenAI-compatible HTTP).

`build_extractor` picks one by `BRAINSTREAM_ENTITY_EXTRACTOR`; spaCy is imported only when it is
chosen (it is an optional extra).
"""

from __future__ import annotations

from pipeline.domain.errors import ConfigError
from pipeline.domain.settings import Settings
from pipeline.entities.extractors.heuristic import HeuristicExtractor
from pipeline.entities.extractors.http import HttpExtractor
from pipeline.openai_compat import retry_policy, secret
from pipeline.ports import Extractor

__all__ = ["HeuristicExtractor", "HttpExtractor", "build_extractor"]


def build_extractor(settings: Settings) -> Extractor:
    """The extractor the settings choose; a missing package, model or URL raises ConfigError."""
    cap = settings.entity_max_mentions_per_row
    if settings.entity_extractor == "spacy":
        from pipeline.entities.extractors.spacy_ import SpacyExtractor

        return SpacyExtractor(model=settings.entity_spacy_model, max_mentions=cap)
    if settings.entity_extractor == "http":
        if not settings.entity_http_url:
            raise ConfigError(
                "BRAINSTREAM_ENTITY_HTTP_URL must be set when BRAINSTREAM_ENTITY_EXTRACTOR=http",
                field="entity_http_url")
        return HttpExtractor(
            settings.entity_http_url, model=settings.entity_http_model,
            api_key=secret(settings.entity_http_api_key), timeout=settings.entity_http_timeout,
            batch_rows=settings.entity_http_batch_rows,
            batch_chars=settings.entity_http_batch_chars, max_mentions=cap,
            retry=retry_policy(settings))
    return HeuristicExtractor(max_mentions=cap)
