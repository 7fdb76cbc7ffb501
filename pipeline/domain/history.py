"""The versions the history reads return (`GET /v1/links/.../history`, `GET /v1/objects/{id}/
history`): what a link or an object was, when it held, and which event made and retired it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class LinkVersion:
    """One row of `link_versions` (migration 0050 says what each column means)."""

    seq: int
    state: str
    meta: dict[str, Any]
    valid_from: datetime | None
    valid_to: datetime | None
    asserted_to: datetime | None
    recorded_at: datetime
    recorded_by: str
    change: str
    invalidated_at: datetime | None
    invalidated_by: str | None


@dataclass(frozen=True)
class LinkHistory:
    from_id: uuid.UUID
    relation_type: str
    to_id: uuid.UUID
    versions: list[LinkVersion]


@dataclass(frozen=True)
class ObjectVersion:
    """One row of `object_versions`."""

    seq: int
    change: str
    event_id: str
    source: str | None
    event_version: int | None
    kind: str
    title: str | None
    properties: dict[str, Any]
    index_text_hash: str | None
    recorded_at: datetime
