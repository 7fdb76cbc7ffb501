"""Request and response bodies of `POST /v1/events` and `POST /v1/objects/delete`
(api/routes/events.py)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from api.plain_text import PLAIN_TEXT, PlainJson
from api.schemas import FiltersBody
from schemas.limits import EVENT_SOURCE_MAX, VERSION_MAX

Text = Annotated[StrictStr, PLAIN_TEXT]


class EventEnvelope(BaseModel):
    """One CloudEvents envelope, typed for the API's document; everything else about it (the
    type's payload, the kind catalog, sizes) is checked by the consumer's own validator."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["brainstream.object.put", "brainstream.object.soft_delete",
                  "brainstream.link.put", "brainstream.link.delete"] = Field(
        description="what the event does (messages, sessions and entity decisions have "
                    "endpoints of their own)")
    data: PlainJson = Field(description="the type's payload (examples/events.jsonl, schemas/json/)")
    id: Text | None = Field(
        default=None, description="the event id; required unless the request sends an "
        "`Idempotency-Key` (ids are then derived from it, the same on a retry)")
    namespace: uuid.UUID | None = Field(default=None, description="the caller's when omitted")
    source: Text | None = Field(default=None, description="always `api:<key name>` (another is "
                                                          "422 `source_not_allowed`)")
    time: datetime | None = None
    specversion: Text | None = None
    datacontenttype: Text | None = None
    version: Annotated[int, Field(ge=0, le=VERSION_MAX)] | None = Field(
        default=None, description="orders writes of one object; needs the `admin` scope")


class PublishEventsBody(BaseModel):
    """Object and link events to publish under the caller's namespace."""

    model_config = ConfigDict(extra="forbid")

    events: list[EventEnvelope] = Field(
        min_length=1,
        description="CloudEvents envelopes of type brainstream.object.put, "
                    "brainstream.object.soft_delete, brainstream.link.put or "
                    "brainstream.link.delete (at most 500). `namespace` defaults to "
                    "the caller's (another is 403); `specversion`, `time` and `source` "
                    "(`api:<key name>`) are optional; `id` is required without an "
                    "`Idempotency-Key` header.")
    wait: bool = Field(default=False, description="wait (bounded by MEMORY_WRITE_WAIT) until "
                                                  "the pipeline has applied every event")


class PublishedEventOut(BaseModel):
    event_id: str
    type: str
    status: Literal["accepted", "applied"]


class PublishEventsOut(BaseModel):
    events: list[PublishedEventOut] = Field(description="one per event sent, in order")


class DeleteObjectsBody(BaseModel):
    """Soft-delete the caller's objects of a source or matching a filter (one event)."""

    model_config = ConfigDict(extra="forbid")

    source: Annotated[Text, Field(min_length=1, max_length=EVENT_SOURCE_MAX)] | None = Field(
        default=None, description="the CloudEvents `source` of the publisher whose objects go "
        "(the source of an object's last put; API keys publish as `api:<key name>`)")
    filters: FiltersBody | None = Field(
        default=None, description="the search's `filters`, judged on first-class objects; with "
        "`source`, both must match")
    where: PlainJson | None = Field(
        default=None, description="the search's `where` conditions on properties, judged on "
        "first-class objects; with `source` or `filters`, all must match")
    all: bool = Field(default=False, description="every object of the namespace; only alone "
                      "(without it, `source`, `where` or a non-empty `filters` is required)")
    dry_run: bool = Field(default=False, description="only count: `matched` and `sample_ids`, "
                          "nothing published")
    wait: bool = Field(default=False, description="wait (bounded by MEMORY_WRITE_WAIT) until the "
                       "pipeline has applied the delete")


class DeleteObjectsOut(BaseModel):
    dry_run: bool
    matched: int = Field(description="objects that match now (the event decides again when it "
                         "is applied: objects put before it count, later ones do not)")
    limit: int = Field(description="the most one delete removes (the first in id order); "
                       "send it again while `matched` is above it")
    sample_ids: list[uuid.UUID] = Field(description="the first matching ids, in the order a "
                                        "delete takes them (at most 10)")
    event_id: str | None = Field(default=None, description="the event published (not on a "
                                 "dry run)")
    status: Literal["accepted", "applied"] | None = None
