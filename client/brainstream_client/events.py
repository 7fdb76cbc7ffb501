"""Events for `POST /v1/events` (the publisher helper): builders for the four event types the
endpoint takes, and its body and answer.

Each builder gives the event an id at once (the API requires one): the pipeline applies an
event id once, so a publish retried after a lost answer cannot apply anything twice.
`namespace`, `time`, `source` and `specversion` may be left out: the API fills them (the
caller's namespace, now, `api:<key name>` (no other source is accepted), `1.0`). Publishing
takes a key with the `write` scope; `version` takes `admin`.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from brainstream_client.models.base import Answer, Body
from brainstream_client.models.read import FiltersBody

EventType = Literal["brainstream.object.put", "brainstream.object.soft_delete",
                    "brainstream.link.put", "brainstream.link.delete"]


class Event(Body):
    """One CloudEvents envelope (`data` is the type's payload)."""

    type: EventType
    data: dict[str, Any]
    # the API requires an id (or an Idempotency-Key): a fresh one unless given
    id: str | None = Field(default_factory=lambda: str(uuid.uuid4()))
    namespace: uuid.UUID | None = None
    source: str | None = None
    time: datetime | None = None
    specversion: str | None = None
    datacontenttype: str | None = None
    version: int | None = None


class PublishBody(Body):
    events: list[Event]
    wait: bool = False


class EventStatusOut(Answer):
    event_id: str
    type: str
    status: Literal["accepted", "applied"]


class PublishOut(Answer):
    """Per event, in order: `accepted` (published) or `applied` (with `wait`, once the
    pipeline applied it)."""

    events: list[EventStatusOut]


def put_object(kind: str, *, id: uuid.UUID | str | None = None, title: str | None = None,
               summary: str | None = None, properties: dict[str, Any] | None = None,
               content: str | None = None, content_type: str | None = None,
               parent_id: uuid.UUID | str | None = None, position: int | None = None,
               version: int | None = None, namespace: uuid.UUID | None = None,
               vector: dict[str, Any] | None = None) -> Event:
    """A `brainstream.object.put`: create or replace an object (a part when `parent_id` is
    set). Without `id`, a new object (a fresh UUID); `version` orders writes of one object;
    `vector` (`{"model", "values"}`) is its own vector, computed with the generation's model."""
    data: dict[str, Any] = {"id": str(id or uuid.uuid4()), "kind": kind}
    for name, value in (("title", title), ("summary", summary), ("properties", properties),
                        ("content", content), ("content_type", content_type),
                        ("parent_id", parent_id), ("position", position), ("vector", vector)):
        if value is not None:
            data[name] = str(value) if isinstance(value, uuid.UUID) else value
    return Event(type="brainstream.object.put", data=data, version=version,
                 namespace=namespace)


def soft_delete(object_id: uuid.UUID | str, *, version: int | None = None,
                namespace: uuid.UUID | None = None) -> Event:
    """A `brainstream.object.soft_delete`: the object (and its parts) leave every answer."""
    return Event(type="brainstream.object.soft_delete", data={"id": str(object_id)},
                 version=version, namespace=namespace)


def put_link(from_id: uuid.UUID | str, to_id: uuid.UUID | str, relation_type: str, *,
             note: str | None = None, status: str | None = None, role: str | None = None,
             confidence: float | None = None, evidence_id: uuid.UUID | str | None = None,
             namespace: uuid.UUID | None = None, valid_from: datetime | None = None,
             valid_to: datetime | None = None) -> Event:
    """A `brainstream.link.put`: a typed edge from one object to another; `note` is what
    `find_links` searches. It holds in the world from `valid_from` (None: always) until
    `valid_to` (None: still); times carry an offset."""
    meta = {name: str(value) if isinstance(value, uuid.UUID) else value
            for name, value in (("note", note), ("status", status), ("role", role),
                                ("confidence", confidence), ("evidence_id", evidence_id))
            if value is not None}
    data: dict[str, Any] = {"from": str(from_id), "to": str(to_id),
                            "relation_type": relation_type, "meta": meta}
    data.update({name: value.isoformat() for name, value in
                 (("valid_from", valid_from), ("valid_to", valid_to)) if value is not None})
    return Event(type="brainstream.link.put", namespace=namespace, data=data)


def delete_link(from_id: uuid.UUID | str, to_id: uuid.UUID | str, relation_type: str, *,
                namespace: uuid.UUID | None = None, valid_to: datetime | None = None,
                retract: bool = False) -> Event:
    """A `brainstream.link.delete`: the edge of that type between the two objects stops
    holding at `valid_to` (None: when the event is recorded); `retract` withdraws it instead,
    as if it never held. Its history is kept."""
    data: dict[str, Any] = {"from": str(from_id), "to": str(to_id),
                            "relation_type": relation_type}
    if valid_to is not None:
        data["valid_to"] = valid_to.isoformat()
    if retract:
        data["retract"] = True
    return Event(type="brainstream.link.delete", namespace=namespace, data=data)


class DeleteObjectsBody(Body):
    """`POST /v1/objects/delete`: the caller's objects of `source` and/or matching `filters`
    (the search's), or `all` of them (only alone)."""

    source: str | None = None
    filters: FiltersBody | None = None
    where: dict[str, Any] | None = None
    all: bool = False
    dry_run: bool = False
    wait: bool = False


class DeleteObjectsOut(Answer):
    """`matched`: objects that match now; one delete removes at most `limit` (the first in id
    order, `sample_ids` shows them); `event_id` and `status` unless a dry run."""

    dry_run: bool
    matched: int
    limit: int
    sample_ids: list[uuid.UUID]
    event_id: str | None = None
    status: Literal["accepted", "applied"] | None = None
