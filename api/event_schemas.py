"""Request and response bodies of `POST /v1/events` (api/routes/events.py)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from api.plain_text import PLAIN_TEXT, PlainJson

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
    id: Text = Field(default_factory=lambda: str(uuid.uuid4()),
                     description="the event id (a new UUID4 when omitted)")
    namespace: uuid.UUID | None = Field(default=None, description="the caller's when omitted")
    source: Text | None = None
    time: datetime | None = None
    specversion: Text | None = None
    datacontenttype: Text | None = None
    version: int | None = Field(default=None, description="orders writes of one object")


class PublishEventsBody(BaseModel):
    """Object and link events to publish under the caller's namespace."""

    model_config = ConfigDict(extra="forbid")

    events: list[EventEnvelope] = Field(
        min_length=1,
        description="CloudEvents envelopes of type brainstream.object.put, "
                    "brainstream.object.soft_delete, brainstream.link.put or "
                    "brainstream.link.delete (at most API_EVENTS_MAX). `namespace` defaults to "
                    "the caller's (another is 403); `id` (a UUID4), `specversion`, `time` and "
                    "`source` (\"api\") are optional.")
    wait: bool = Field(default=False, description="wait (bounded by MEMORY_WRITE_WAIT) until "
                                                  "the pipeline has applied every event")


class PublishedEventOut(BaseModel):
    event_id: str
    type: str
    status: Literal["accepted", "applied"]


class PublishEventsOut(BaseModel):
    events: list[PublishedEventOut] = Field(description="one per event sent, in order")
