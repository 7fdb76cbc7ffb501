"""Request and response bodies of `POST /v1/events` (api/routes/events.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class PublishEventsBody(BaseModel):
    """Object and link events to publish under the caller's namespace."""

    model_config = ConfigDict(extra="forbid")

    events: list[Any] = Field(
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
