"""The write path's values: what it reads of existing rows and what a put writes (plain data).

The port that produces and takes them is `EventStore` in `pipeline/ports.py`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pipeline.domain.read_model import Filters


@dataclass(frozen=True)
class ObjectHead:
    """What the write path needs to know about an existing object row."""

    id: uuid.UUID
    namespace_id: uuid.UUID
    kind: str
    title: str | None
    parent_id: uuid.UUID | None
    source_version: int | None
    deleted_at: datetime | None


@dataclass(frozen=True)
class ObjectWrite:
    """A full object row as a put writes it."""

    id: uuid.UUID
    namespace_id: uuid.UUID
    kind: str
    title: str | None
    summary: str | None
    properties: dict[str, Any]
    content: str | None
    content_type: str | None
    parent_id: uuid.UUID | None
    position: int | None
    index_text_hash: str
    source_version: int | None
    event_id: str
    source: str  # the CloudEvents source of the put (a delete by source matches it)
    chunked: bool = False
    context_title: str | None = None  # a part's parent title (searched with the part)
    # what created_at / updated_at are stamped with: the event's record time when the row is
    # written together with other events' rows (pipeline/ingest/bulk.py); None: the event time
    # the store holds (`EventStore.set_event_time`)
    at: datetime | None = None


@dataclass(frozen=True)
class DeferredRow:
    id: int
    wait_key: str
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    code: str
    reason: str
    field: str | None
    age_seconds: float
    attempts: int
    record_time: datetime | None = None  # the record's time: what its writes are stamped with


@dataclass(frozen=True)
class LinkHead:
    namespace_id: uuid.UUID
    source_version: int | None
    deleted_at: datetime | None


@dataclass(frozen=True)
class Selection:
    """What a delete by source or filter matches: the live first-class objects whose last put
    came from `source` (None: any) and that pass `filters` (the search's)."""

    source: str | None
    filters: Filters
