"""Conversation memory's settings: the window, how long a write waits, retention, the
summariser, and how the message extractors batch and lease their work."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr

# A batch of messages (or a fold) that fails is retried with jittered back-off (at most this many
# seconds apart) this many times, then given up and dead-lettered, as the other stages do.
MEMORY_RETRY_ATTEMPTS = 5
MEMORY_RETRY_MAX_WAIT = 10.0


class MemorySettings(BaseModel):
    """The window, writes, retention, summariser, extractors."""

    memory_window: int = Field(
        default=12, ge=2, le=1000, description="Messages after the summary point that GET "
        "memory returns; older ones are folded into the summary. Raise it for agents with a "
        "larger context.")
    memory_write_wait: float = Field(
        default=5.0, gt=0, le=60, description="How long a write with `wait: true` (messages, "
        "POST /v1/events) waits to be stored before it answers 202. Keep it below "
        "API_REQUEST_TIMEOUT.")
    memory_retention_days: float = Field(
        default=30.0, ge=0, description="Days a deleted session or message is kept before "
        "`purge` erases it. Set it to your retention policy.")
    summariser: Literal["extractive", "http"] = Field(
        default="extractive", description="Who writes session summaries: `extractive` (picks "
        "sentences, no model) or `http` (an OpenAI-compatible chat model).")
    summariser_url: str | None = Field(
        default=None, description="The `http` summariser's chat-completions endpoint. Set it "
        "with SUMMARISER=http.")
    summariser_model: str | None = Field(
        default=None, description="The model the `http` summariser asks for. Set it with "
        "SUMMARISER=http.")
    summariser_api_key: SecretStr | None = Field(
        default=None, description="The `http` summariser's bearer key. Set it when the server "
        "needs one.")
    summariser_timeout: float = Field(
        default=60.0, gt=0, le=3600, description="Seconds one summary request may take. Raise "
        "it for a slow model.")
    memory_extract_batch_size: int = Field(
        default=64, ge=1, le=4096, description="Messages (and sessions) the memory stage claims "
        "at once. Lower it for slow extractors so a killed worker loses less.")
    memory_extract_lease_seconds: float = Field(
        default=120.0, gt=0, description="How long claimed messages are a worker's before "
        "another may take them. Raise it for slow extractors or summarisers.")
