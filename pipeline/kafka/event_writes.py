"""`POST /v1/events` (issue 15): the API publishes object and link events for a caller like any
publisher (keyed by aggregate, signed with the API's publisher key if it has one) and, when
asked, waits a bounded time until the pipeline has applied them.

Every event of a request is completed (id, time, source, namespace defaults) and validated as
the consumer would validate it (`schemas.events.parse_event`, then the kind catalog) before the
first one is sent, so a request with one bad event publishes nothing. The event is still the
only way in: what is published here is replayed, dead-lettered and counted like any event.

Who publishes is the caller's key (`Publisher`): its events carry the source `api:<key name>`,
never one another publisher's ledger entries are kept under (the ledger dedups on namespace,
source and id); `version`, which can pin an object against later writes, takes the `admin`
scope. Each event has an id the caller chose or one derived from the request's
`Idempotency-Key`, so a retried request sends the same (source, id) and the consumer's ledger
drops the copy.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from pipeline.access import key_source
from pipeline.domain.errors import (
    IdempotencyRequired,
    InvalidInput,
    MalformedJson,
    NamespaceForbidden,
    ScopeRequired,
    SourceNotAllowed,
)
from pipeline.domain.kinds import KindCatalog
from pipeline.kafka.publish_pool import PublishPool
from pipeline.kafka.publisher import EventPublisher, LazyPublisher
from schemas.deletes import ObjectsSoftDelete
from schemas.events import (
    LINK_DELETE,
    LINK_PUT,
    OBJECT_PUT,
    OBJECT_SOFT_DELETE,
    OBJECTS_SOFT_DELETE,
    ObjectPut,
    parse_event,
)

# The types a caller may publish here; messages and sessions have their own endpoints, and a
# curator's decision is not an event a plain key may send.
PUBLISHABLE = (OBJECT_PUT, OBJECT_SOFT_DELETE, LINK_PUT, LINK_DELETE)
# The uuid5 namespace of the event ids derived from an Idempotency-Key (a fixed constant: the
# same request must derive the same ids in every API process, before and after a restart).
IDEMPOTENT_IDS = uuid.UUID("5f0c7f4e-3c1d-4b8e-9a57-2d6a1b0e9c43")
# An Idempotency-Key: printable ASCII, no longer than an event id (schemas/limits.py).
IDEMPOTENCY_KEY_MAX = 200

T = TypeVar("T")

# (source, event id) of the events to look for -> those the pipeline has applied.
AppliedEvents = Callable[[Sequence[tuple[str, str]]], Awaitable[set[tuple[str, str]]]]


@dataclass(frozen=True)
class Admitted:
    """One validated event, ready to send: its complete envelope and identity."""

    envelope: dict[str, Any]
    event_id: str
    source: str
    type: str


@dataclass(frozen=True)
class Publisher:
    """Who publishes a request's events: the caller's key name (the events' source is
    `api:<name>`), whether it may set `version` (the `admin` scope), and the request's
    Idempotency-Key (None: every event names its id)."""

    name: str
    may_version: bool
    idempotency_key: str | None = None

    @property
    def source(self) -> str:
        """The CloudEvents `source` of every event this publisher sends."""
        return key_source(self.name)

    def derived_id(self, index: int) -> str:
        """The id of the request's event `index` without one: the same key, Idempotency-Key
        and place give the same id (a retry re-sends the same event)."""
        return str(uuid.uuid5(IDEMPOTENT_IDS, json.dumps([self.name, self.idempotency_key,
                                                          index])))


def idempotency_key(value: str | None) -> str | None:
    """An Idempotency-Key header as given, checked (`InvalidInput` naming the header)."""
    if value is None:
        return None
    if not 1 <= len(value) <= IDEMPOTENCY_KEY_MAX or not value.isascii() \
            or not value.isprintable() or not value.strip():
        raise InvalidInput(f"Idempotency-Key: 1-{IDEMPOTENCY_KEY_MAX} printable ASCII "
                           "characters", field="Idempotency-Key")
    return value


def event_time() -> str:
    """Now, as the API stamps the `time` of the events it publishes."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _refuse(exc: InvalidInput, where: str) -> InvalidInput:
    """The same error (same class, so the same code) with its field placed in the request."""
    field = f"{where}.{exc.field}" if exc.field else where
    return type(exc)(f"{where}: {exc.message}", field=field)


def admit_one(raw: object, index: int, namespace: uuid.UUID, catalog: KindCatalog,
              *, max_bytes: int, publisher: Publisher) -> Admitted:
    """Complete one caller's envelope with its defaults and validate it (`InvalidInput` naming
    `events.<index>.<field>`; `NamespaceForbidden` for another namespace; `ScopeRequired` for
    a `version` without the admin scope)."""
    where = f"events.{index}"
    if not isinstance(raw, dict):
        raise InvalidInput(f"{where}: an event is a JSON object (an envelope)", field=where)
    if raw.get("source", publisher.source) != publisher.source:
        raise SourceNotAllowed(f"{where}: events published with this key have the source "
                               f"{publisher.source!r}", field=f"{where}.source")
    if raw.get("version") is not None and not publisher.may_version:
        raise ScopeRequired(f"{where}: setting `version` takes the admin scope",
                            field=f"{where}.version")
    event_id = raw.get("id")
    if event_id is None:
        if publisher.idempotency_key is None:
            raise IdempotencyRequired(f"{where}: give every event an `id`, or send an "
                                      "Idempotency-Key header (a retry then applies once)",
                                      field=f"{where}.id")
        event_id = publisher.derived_id(index)
    envelope: dict[str, Any] = {"specversion": "1.0", "time": event_time(), **raw,
                                "source": publisher.source, "id": event_id}
    given = envelope.setdefault("namespace", str(namespace))
    try:
        foreign = isinstance(given, str) and uuid.UUID(given) != namespace
    except ValueError:
        foreign = False  # not a UUID: parse_event names it below
    if foreign:
        raise NamespaceForbidden(f"{where}: the key is not bound to that namespace",
                                 field=f"{where}.namespace")
    if envelope.get("type") not in PUBLISHABLE:
        raise InvalidInput(f"{where}: type must be one of {', '.join(PUBLISHABLE)}",
                           field=f"{where}.type")
    try:
        value = json_bytes(envelope)
    except (ValueError, RecursionError):  # nested past what JSON encoding allows
        raise MalformedJson(f"{where}: the event cannot be encoded as JSON", field=where) from None
    try:
        event = parse_event(value, max_bytes=max_bytes)
        if isinstance(event.payload, ObjectPut):
            catalog.validate_put(event.payload.kind, event.payload.properties)
    except InvalidInput as exc:
        raise _refuse(exc, where) from None
    return Admitted(envelope, event.event_id, event.source, event.type)


def admit_delete(payload: ObjectsSoftDelete, namespace: uuid.UUID, *, max_bytes: int,
                 publisher: Publisher) -> Admitted:
    """A delete by source or filter (`brainstream.objects.soft_delete`, its payload checked by
    `schemas.deletes.parse_delete` and its filters against the catalog) as the caller's event
    for its namespace."""
    event_id = publisher.derived_id(0) if publisher.idempotency_key else str(uuid.uuid4())
    envelope: dict[str, Any] = {
        "specversion": "1.0", "id": event_id, "source": publisher.source,
        "type": OBJECTS_SOFT_DELETE, "time": event_time(), "namespace": str(namespace),
        "data": payload.model_dump(mode="json", exclude_none=True, exclude_defaults=True)}
    event = parse_event(json_bytes(envelope), max_bytes=max_bytes)
    return Admitted(envelope, event.event_id, event.source, event.type)


def json_bytes(envelope: dict[str, Any]) -> bytes:
    """The record value the publisher will send (the parser checks exactly these bytes)."""
    return json.dumps(envelope, ensure_ascii=False).encode("utf-8", "surrogatepass")


def admit(events: Sequence[object], namespace: uuid.UUID, catalog: KindCatalog, *,
          max_bytes: int, publisher: Publisher) -> list[Admitted]:
    """Validate every event of a request, in order; the first bad one refuses them all."""
    return [admit_one(raw, index, namespace, catalog, max_bytes=max_bytes, publisher=publisher)
            for index, raw in enumerate(events)]


async def poll_until(probe: Callable[[], Awaitable[T | None]], *, seconds: float,
                     interval: float) -> T | None:
    """Call `probe` until it answers something (returned) or `seconds` have passed (None);
    at least once. The write-through endpoints wait this way for their events' effects."""
    deadline = time.monotonic() + seconds
    while True:
        found = await probe()
        if found is not None:
            return found
        if time.monotonic() >= deadline:
            return None
        await asyncio.sleep(interval)


class EventWriter:
    """Publishes admitted events for the API; the producer is made on first use (the API starts
    and serves reads while the broker is down)."""

    def __init__(self, make_publisher: Callable[[], EventPublisher], *, wait_seconds: float,
                 threads: PublishPool, poll_seconds: float = 0.05) -> None:
        self._publisher = LazyPublisher(make_publisher, timeout=wait_seconds + 10.0)
        self._threads = threads
        self.wait_seconds = wait_seconds
        self.poll_seconds = poll_seconds

    async def publish(self, admitted: Sequence[Admitted], *, wait: bool,
                      applied: AppliedEvents) -> set[tuple[str, str]]:
        """Send the events (`Unavailable` when the broker does not acknowledge them); with
        `wait`, poll `applied` until all are applied or the wait runs out. Returns the
        (source, event id) of those known applied (none without `wait`)."""
        await self._threads.run(self._publisher.publish_all, [a.envelope for a in admitted])
        if not wait:
            return set()
        keys = [(a.source, a.event_id) for a in admitted]
        last: set[tuple[str, str]] = set()

        async def all_applied() -> set[tuple[str, str]] | None:
            nonlocal last
            last = await applied(keys)
            return last if len(last) >= len(set(keys)) else None

        await poll_until(all_applied, seconds=self.wait_seconds, interval=self.poll_seconds)
        return last

    def close(self) -> None:
        """Close the producer, if one was made."""
        self._publisher.close()
