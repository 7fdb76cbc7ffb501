"""The write path's values: a consumed record, a dead letter, a batch's outcome, the options,
and what every handler of an event is given.

Plain data shared by the modules of `pipeline/ingest/` (and by the callers that build records
and read outcomes: the consumer, the replay).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pipeline.domain.errors import BrainstreamError, InvalidRecordTime
from pipeline.domain.index_text import CONTENT_CAP_CHARS
from pipeline.domain.kinds import KindCatalog
from pipeline.domain.vectors import VectorSpace
from pipeline.embedding.identity import vector_space
from pipeline.embedding.settings import EmbeddingSettings
from pipeline.ingest.settings import IngestSettings
from pipeline.kafka.signing import PublisherKeys
from pipeline.ports import EventStore


@dataclass(frozen=True)
class RawRecord:
    """A Kafka record as consumed: enough to dead-letter it faithfully."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()
    # the record's Kafka timestamp (ms since the epoch): what its writes are stamped with, so a
    # replay reproduces created_at / updated_at / deleted_at; None: the transaction's time
    timestamp_ms: int | None = None

    @property
    def time(self) -> datetime | None:
        """The record's timestamp as a time (None: it has none). Raises `InvalidRecordTime` for
        one past what a datetime holds (year 10000 and later): the producer chose it."""
        if self.timestamp_ms is None or self.timestamp_ms < 0:
            return None
        try:
            return datetime.fromtimestamp(self.timestamp_ms / 1000.0, tz=UTC)
        except (ValueError, OverflowError, OSError):
            raise InvalidRecordTime(
                f"the record's timestamp {self.timestamp_ms} ms is past the year 9999") from None


@dataclass(frozen=True)
class DeadLetter:
    record: RawRecord
    error: BrainstreamError
    event_id: str | None = None

    def describe(self) -> str:
        """One log line: where the record was, which event, and the machine-readable reason."""
        field = f" (field {self.error.field})" if self.error.field else ""
        return (f"{self.record.topic}[{self.record.partition}]@{self.record.offset}"
                f" event {self.event_id or '-'}: {self.error.code}{field}:"
                f" {self.error.message[:300]}")


@dataclass
class BatchOutcome:
    applied: int = 0
    duplicates: int = 0
    stale: int = 0
    deferred: int = 0
    dead: list[DeadLetter] = field(default_factory=list)
    embed_roots: set[uuid.UUID] = field(default_factory=set)
    outbox_rows: int = 0
    # sessions (pipeline.domain.memory_model.session_key) whose extractors or summariser have work
    memory_sessions: set[uuid.UUID] = field(default_factory=set)
    entity_decisions: int = 0  # curators' decisions recorded: the worker applies them
    markers: int = 0  # replay markers: skipped, never dead-lettered


@dataclass(frozen=True)
class IngestOptions:
    max_event_bytes: int = 1_000_000
    chunk_max_tokens: int = 200
    chunk_overlap_tokens: int = 30
    content_cap_chars: int = 2000
    defer_seconds: float = 300.0
    deferred_per_batch: int = 200
    publisher_keys: PublisherKeys = field(default_factory=PublisherKeys)
    # The shortest run of consecutive puts applied together (pipeline/ingest/bulk.py): a run of
    # one costs what the event-by-event path costs (a savepoint, a claim, a lock, an upsert), two
    # already save half the round trips. A benchmark or a test sets it past any batch to
    # measure or check the event-by-event path.
    min_run: int = 2
    # the generation's vector space: what a put's `vector` must fit (None: puts carry none)
    vector_space: VectorSpace | None = None


def ingest_options(settings: IngestSettings) -> IngestOptions:
    """The options of the write path, from the settings."""
    return IngestOptions(
        max_event_bytes=settings.max_event_bytes,
        chunk_max_tokens=settings.chunk_max_tokens,
        chunk_overlap_tokens=settings.chunk_overlap_tokens,
        content_cap_chars=CONTENT_CAP_CHARS,
        defer_seconds=settings.defer_seconds,
        publisher_keys=PublisherKeys.from_settings(settings),
        # the full settings name the generation's embedder (a replay's own); the ingest
        # settings alone take no caller vectors
        vector_space=vector_space(settings) if isinstance(settings, EmbeddingSettings)
        else None,
    )


@dataclass(frozen=True)
class Applying:
    """What a handler applies an event with: the batch's store (in its transaction), the kind
    catalog, the options and the outcome it counts into."""

    store: EventStore
    catalog: KindCatalog
    options: IngestOptions
    outcome: BatchOutcome
    # a deferred event being retried: the wait key it was parked under (it must not wait
    # behind itself)
    waiting_ok: str | None = None
    # the event's record is signed by a privileged publisher key of its namespace
    # (pipeline.kafka.signing.PublisherKeys.is_privileged): it may write `system` metadata
    privileged: bool = False


class Stale(Exception):
    """An older event (by `version`) about an object or link that moved on: a no-op."""


def check_version(existing_version: int | None, version: int | None) -> None:
    """Raise `Stale` when the event's version is older than the row's."""
    if version is not None and existing_version is not None and version < existing_version:
        raise Stale()
