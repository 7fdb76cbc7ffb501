"""Response bodies of the history reads: `GET /v1/links/{link_id}/history` (and
`GET /v1/links/history?from=&type=&to=`) and `GET /v1/objects/{id}/history`."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from pipeline.domain.history import LinkHistory, LinkVersion, ObjectVersion
from pipeline.domain.links import link_id


class LinkVersionOut(BaseModel):
    """One version of a link: from `valid_from` (null: always) until `valid_to` (null: still)
    the link held (`state` holds) with this `meta`, or from `valid_from` on it did not (`state`
    ended); believed from `recorded_at` until `invalidated_at` (null: still believed)."""

    seq: int = Field(description="in the order written")
    state: Literal["holds", "ended"]
    meta: dict[str, Any]
    valid_from: datetime | None
    valid_to: datetime | None
    asserted_to: datetime | None = Field(description=(
        "the valid_to its event stated (valid_to may be earlier: the next assertion starts "
        "there)"))
    recorded_at: datetime
    recorded_by: str = Field(description="the event that wrote it, `source#id`")
    change: Literal["put", "delete", "cut", "retract", "backfill"]
    invalidated_at: datetime | None
    invalidated_by: str | None = Field(description="the event that retired it, `source#id`")

    @classmethod
    def of(cls, v: LinkVersion) -> LinkVersionOut:
        return cls.model_validate(v, from_attributes=True)


class LinkHistoryOut(BaseModel):
    link_id: uuid.UUID
    from_id: uuid.UUID = Field(serialization_alias="from")
    relation_type: str
    to: uuid.UUID
    versions: list[LinkVersionOut]

    @classmethod
    def of(cls, h: LinkHistory) -> LinkHistoryOut:
        return cls(link_id=link_id(h.from_id, h.relation_type, h.to_id), from_id=h.from_id,
                   relation_type=h.relation_type, to=h.to_id,
                   versions=[LinkVersionOut.of(v) for v in h.versions])


class ObjectVersionOut(BaseModel):
    """One version of an object: what its put (or delete, or revival) made it, and when."""

    seq: int
    change: Literal["put", "delete", "revive", "backfill"]
    event_id: str
    source: str | None
    event_version: int | None
    kind: str
    title: str | None
    properties: dict[str, Any]
    index_text_hash: str | None = Field(description="whether the searchable text changed")
    recorded_at: datetime

    @classmethod
    def of(cls, v: ObjectVersion) -> ObjectVersionOut:
        return cls.model_validate(v, from_attributes=True)


class ObjectHistoryOut(BaseModel):
    object_id: uuid.UUID
    versions: list[ObjectVersionOut]
