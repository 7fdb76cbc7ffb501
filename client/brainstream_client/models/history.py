"""The history reads' answers (the API's `api/history_schemas.py`): a link's versions by world
and system time, and an object's versions, each with the events that made them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import Field

from brainstream_client.models.base import Answer


class LinkVersionOut(Answer):
    """From `valid_from` (None: always) until `valid_to` (None: still) the link held (`state`
    holds), or from `valid_from` it did not (ended); believed from `recorded_at` until
    `invalidated_at` (None: still)."""

    seq: int
    state: Literal["holds", "ended"]
    meta: dict[str, Any]
    valid_from: datetime | None
    valid_to: datetime | None
    asserted_to: datetime | None
    recorded_at: datetime
    recorded_by: str
    change: Literal["put", "delete", "cut", "retract", "backfill"]
    invalidated_at: datetime | None
    invalidated_by: str | None


class LinkHistoryOut(Answer):
    link_id: UUID
    from_: UUID = Field(alias="from")
    relation_type: str
    to: UUID
    versions: list[LinkVersionOut]


class ObjectVersionOut(Answer):
    seq: int
    change: Literal["put", "delete", "revive", "backfill"]
    event_id: str
    source: str | None
    event_version: int | None
    kind: str
    title: str | None
    properties: dict[str, Any]
    index_text_hash: str | None
    recorded_at: datetime


class ObjectHistoryOut(Answer):
    object_id: UUID
    versions: list[ObjectVersionOut]
