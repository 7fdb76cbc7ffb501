"""The write path's settings: how the consumer batches, how content is chunked, and how long an
event waits for what it refers to."""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator

from pipeline.kafka.settings import KafkaSettings

# Records per offset commit of the consumer (faust commits acknowledged offsets every so many).
CONSUMER_BATCH_SIZE = 200
# The most records one batch (one transaction) takes: the consumer takes what is waiting, up to
# this, so a caught-up consumer applies the few records of the last CONSUMER_BATCH_SECONDS and
# one that is behind (a backlog, a burst) or a replay applies large batches: the commit is
# amortised and runs of puts go through set-based statements (pipeline/ingest/bulk.py; SciFact
# puts: about 3 s per batch of 2,000 on one core, python -m bench.ingest.bulk).
BULK_BATCH_SIZE = 2000
# How long the consumer waits to fill a batch before it applies what it has: the publish-to-
# durable latency a quiet stream pays.
CONSUMER_BATCH_SECONDS = 0.1
# The broker's fetch wait: how long a fetch blocks when no record is there (a quiet topic costs
# one request per wait, a busy one never waits).
CONSUMER_FETCH_WAIT_MS = 500


class IngestSettings(KafkaSettings):
    """Chunking and deferred events (with the Kafka and stack groups the write path reads)."""

    chunk_max_tokens: int = Field(
        default=200, ge=16, le=8192, description="The longest part a document is chunked into, "
        "in tokens. Change it for an embedder with another input length (then replay).")
    chunk_overlap_tokens: int = Field(
        default=30, ge=0, le=4096, description="Tokens two neighbouring parts share. Change it "
        "with CHUNK_MAX_TOKENS.")
    defer_seconds: float = Field(
        default=300.0, ge=0, description="How long an event whose object or link endpoint has "
        "not arrived yet waits (retried with back-off) before it is dead-lettered. Raise it "
        "when publishers deliver related events far apart.")

    @field_validator("chunk_overlap_tokens")
    @classmethod
    def _overlap_below_max(cls, value: int, info: ValidationInfo) -> int:
        limit = info.data.get("chunk_max_tokens")
        if isinstance(limit, int) and value >= limit:
            raise ValueError("must be smaller than CHUNK_MAX_TOKENS")
        return value
