"""Entity extractors: the `Extractor` port's adapters (heuristic, spaCy, OpenAI-compatible HTTP).

`build_extractor` picks one by `BRAINSTREAM_ENTITY_EXTRACTOR`; spaCy is imported only when it is
chosen (it is an optional extra).
"""

from __future__ import annotations

from pipeline.domain.errors import ConfigError
from pipeline.entities.extractors.heuristic import HeuristicExtractor
from pipeline.entities.extractors.http import HttpExtractor
from pipeline.entities.settings import EntitySettings
from pipeline.openai_compat import retry_policy, secret
from pipeline.ports import Extractor

__all__ = ["HeuristicExtractor", "HttpExtractor", "build_extractor"]

# The most mentions one row keeps (the first ones by field and position): a row past it is cut,
# so one pathological document cannot flood the mention table.
MAX_MENTIONS_PER_ROW = 200
# What one `http` request carries: rows, and characters of row text (a longer row goes alone).
# Sized for a chat model's context with room for its answer.
HTTP_BATCH_ROWS = 16
HTTP_BATCH_CHARS = 24_000


def build_extractor(settings: EntitySettings) -> Extractor:
    """The extractor the settings choose; a missing package, model or URL raises ConfigError."""
    cap = MAX_MENTIONS_PER_ROW
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
            batch_rows=HTTP_BATCH_ROWS, batch_chars=HTTP_BATCH_CHARS, max_mentions=cap,
            retry=retry_policy())
    return HeuristicExtractor(max_mentions=cap)
