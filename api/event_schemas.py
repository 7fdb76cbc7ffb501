"""Request and response bodies of `POST /v1/events` (api/routes/events.py)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from api.plain_text import PLAIN_TEXT, PlainJson
from schemas.limits import VERSION_MAX

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
