"""The relay's settings: how many outbox rows one graph round trip applies, and how often a row
the graph refuses is tried before it is dead-lettered."""

from __future__ import annotations

from pydantic import BaseModel, Field

# The longest wait (seconds) between two tries of a row the graph refused: long enough that a
# restarting graph is not hammered, short enough that it catches up within a minute.
RELAY_MAX_BACKOFF = 30.0


class RelaySettings(BaseModel):
    """The relay's batches and retries."""

    relay_batch_size: int = Field(
        default=500, ge=1, le=100_000, description="Outbox rows (objects and links) the relay "
        "applies to the graph in one round trip. Lower it when graph writes time out.")
    relay_max_attempts: int = Field(
        default=8, ge=1, le=100, description="Tries of an outbox row the graph refuses before "
        "it is dead-lettered `graph_sync_failed` (with back-off up to 30 s). Raise it to ride "
        "out longer graph outages without dead letters.")
