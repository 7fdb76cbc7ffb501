"""CloudEvents 1.0 (structured JSON mode) envelope and the event parser.

`parse_event` is the only way raw Kafka record values become events: it refuses anything that is
not a well-formed envelope around a valid payload (the payload models are in `schemas.payloads`
and are importable from here too), with an `InvalidInput` subclass whose stable `code` and
`field` the dead-letter topic records.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
)

from pipeline.domain.chunking import explicit_part_id
from pipeline.domain.errors import (
    InvalidEnvelope,
    InvalidPayload,
    MalformedJson,
    PayloadTooLarge,
    UnknownEventType,
)
from pipeline.domain.sessions import session_key
from pipeline.domain.structure import check_structure
from schemas.deletes import OBJECTS_SOFT_DELETE, ObjectsSoftDelete
from schemas.limits import (
    EVENT_ID_MAX,
    EVENT_SOURCE_MAX,
    EVENT_SUBJECT_MAX,
    MEDIA_TYPE_MAX,
    VERSION_MAX,
)
from schemas.memory import MemoryPayload
from schemas.payloads import (
    LINK_DELETE,
    LINK_PUT,
    OBJECT_PUT,
    OBJECT_SOFT_DELETE,
    PAYLOAD_MODELS,
    EventType,
    LinkDelete,
    LinkMeta,
    LinkPut,
    ObjectPut,
    ObjectSoftDelete,
    Payload,
    PropertyKey,
    PropertyValue,
)

# The payload names are re-exported: callers import every event name from one module.
__all__ = [
    "DEFAULT_MAX_BYTES", "LINK_DELETE", "LINK_PUT", "OBJECTS_SOFT_DELETE", "OBJECT_PUT",
    "OBJECT_SOFT_DELETE", "PAYLOAD_MODELS", "Envelope", "EventType", "LinkDelete", "LinkMeta",
    "LinkPut", "ObjectPut", "ObjectSoftDelete", "ObjectsSoftDelete", "ParsedEvent", "Payload",
    "PropertyKey", "PropertyValue",
    "derive_object_id", "looks_like_envelope", "parse_event", "record_key", "wrap_bare_object",
]

DEFAULT_MAX_BYTES = 1_000_000

# Non-blank, and bounded (schemas/limits.py).
EventId = Annotated[StrictStr, Field(min_length=1, max_length=EVENT_ID_MAX, pattern=r"\S")]
EventSource = Annotated[StrictStr, Field(min_length=1, max_length=EVENT_SOURCE_MAX, pattern=r"\S")]


def _require_str(value: Any) -> Any:
    # Lax datetime parsing would read a bare number as a Unix timestamp; CloudEvents says RFC 3339.
    if not isinstance(value, str):
        raise ValueError("time must be an RFC 3339 string")
    return value


def _json_media_type(value: str) -> str:
    media = value.split(";", 1)[0].strip().lower()
    if media != "application/json" and not (
        media.startswith("application/") and media.endswith("+json")
    ):
        raise ValueError("only JSON data is accepted (application/json or application/*+json)")
    return value


# --- envelope ------------------------------------------------------------------------------------


class Envelope(BaseModel):
    """A CloudEvents 1.0 structured-mode envelope. Unknown extension attributes are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True, title="Envelope")

    specversion: Literal["1.0"]
    id: EventId
    source: EventSource
    type: EventType
    subject: Annotated[StrictStr, Field(max_length=EVENT_SUBJECT_MAX)] | None = None
    time: Annotated[AwareDatetime, BeforeValidator(_require_str)] | None = None
    datacontenttype: Annotated[
        StrictStr, Field(max_length=MEDIA_TYPE_MAX), AfterValidator(_json_media_type)
    ] = Field(default="application/json", description="application/json or application/*+json")
    namespace: uuid.UUID
    version: Annotated[StrictInt, Field(ge=0, le=VERSION_MAX)] | None = Field(
        default=None, description="Source version; events older than the stored one are ignored."
    )
    data: dict[str, Any] = Field(
        description="The payload; its schema depends on `type` (see the payload schemas)."
    )


# --- parsing -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedEvent:
    """A validated event. `object_id` is the effective object id of a put (given or derived;
    also set on the payload) and the id of a soft delete; None for links."""

    envelope: Envelope
    payload: Payload
    namespace: uuid.UUID
    event_id: str
    source: str
    type: EventType
    version: int | None
    object_id: uuid.UUID | None


def derive_object_id(namespace: uuid.UUID, *, source: str, event_id: str) -> uuid.UUID:
    """The id of an object put without one: stable for the same event, so a replay re-derives it.

    CloudEvents ids are only unique per `source`, so the source is part of the derivation.
    """
    return uuid.uuid5(namespace, json.dumps(["brainstream.object", source, event_id]))


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Duplicate keys are legal JSON syntax but ambiguous; a producer bug we refuse to guess about.
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _path(prefix: str, loc: tuple[int | str, ...]) -> str:
    out = prefix
    for part in loc:
        if part == "[key]":  # pydantic marks a bad dict key; the key itself is already in loc
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _check_strings(obj: Any) -> None:
    """Refuse NUL characters (Postgres text cannot hold them) and lone surrogates (not Unicode)."""
    stack: list[tuple[str, Any]] = [("", obj)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((path, key) for key in value)  # keys are strings too
            stack.extend((f"{path}.{k}" if path else k, v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise MalformedJson(f"{path}: lone surrogate in string", field=path) from None
            if "\x00" in value:
                in_data = path == "data" or path.startswith(("data.", "data["))
                error = InvalidPayload if in_data else InvalidEnvelope
                raise error(f"{path}: NUL character in string", field=path)


def _decode(raw: bytes | str, max_bytes: int) -> Any:
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    if len(data) > max_bytes:
        raise PayloadTooLarge(f"event is {len(data)} bytes, the limit is {max_bytes}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MalformedJson(f"event is not UTF-8: {exc}") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise MalformedJson(f"event is not valid JSON: {exc}") from None


def parse_event(raw: bytes | str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> ParsedEvent:
    """Parse and validate one Kafka record value into a `ParsedEvent`.

    Raises PayloadTooLarge, MalformedJson, InvalidEnvelope, UnknownEventType, InvalidPayload
    or StructureInvalid
    (all `InvalidInput`), with `field` naming the offending attribute when known.
    """
    obj = _decode(raw, max_bytes)
    _check_strings(obj)
    if not isinstance(obj, dict):
        raise InvalidEnvelope("an event is a JSON object (a CloudEvents envelope)")
    if "specversion" not in obj:
        raise InvalidEnvelope(
            "not a CloudEvents envelope (no specversion); bare objects must be wrapped by the "
            "publisher (`brainstream publish` does)",
            field="specversion",
        )
    if "data_base64" in obj:
        raise InvalidEnvelope("binary data (data_base64) is not accepted", field="data_base64")
    try:
        envelope = Envelope.model_validate(obj)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        if isinstance(obj.get("type"), str) and any(e["loc"] == ("type",) for e in errors):
            shown = obj["type"][:100]  # the message names it, without echoing a huge one
            raise UnknownEventType(f"unknown event type {shown!r}", field="type") from None
        path = _path("", tuple(errors[0]["loc"]))
        raise InvalidEnvelope(f"{path}: {errors[0]['msg']}", field=path or None) from None

    try:
        payload: Payload = PAYLOAD_MODELS[envelope.type].model_validate(envelope.data)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        path = _path("data", tuple(error["loc"]))
        raise InvalidPayload(f"{path}: {error['msg']}", field=path) from None

    object_id: uuid.UUID | None = None
    if isinstance(payload, ObjectPut):
        check_structure(payload)
        object_id = payload.id
        if object_id is None:
            # An explicit part is addressed by its place in the parent, like chunked parts.
            if payload.parent_id is not None and payload.position is not None:
                object_id = explicit_part_id(envelope.namespace, payload.parent_id,
                                             payload.position)
            else:
                object_id = derive_object_id(
                    envelope.namespace, source=envelope.source, event_id=envelope.id
                )
            payload = payload.model_copy(update={"id": object_id})
    elif isinstance(payload, ObjectSoftDelete):
        object_id = payload.id
    return ParsedEvent(
        envelope, payload, envelope.namespace, envelope.id, envelope.source, envelope.type,
        envelope.version, object_id,
    )


def record_key(event: ParsedEvent) -> bytes:
    """The Kafka record key: the aggregate id (object id; a part's parent id; a link's `from`;
    a memory event's session key; a delete by source or filter's namespace), so that all events
    about one aggregate land on one partition, in order."""
    payload = event.payload
    key: uuid.UUID | None
    if isinstance(payload, ObjectsSoftDelete):
        key = event.namespace
    elif isinstance(payload, MemoryPayload):
        key = session_key(event.namespace, payload.session_id)
    elif isinstance(payload, ObjectPut):
        key = payload.parent_id or event.object_id
    elif isinstance(payload, ObjectSoftDelete):
        key = payload.id
    else:
        key = payload.from_id
    return str(key).encode("ascii")


def looks_like_envelope(obj: object) -> bool:
    """Whether a decoded JSON line is an envelope (else a bare object to wrap)."""
    return isinstance(obj, dict) and "specversion" in obj


def wrap_bare_object(
    obj: dict[str, Any],
    namespace: uuid.UUID,
    source: str,
    *,
    event_id: str | None = None,
    time: datetime | None = None,
) -> dict[str, Any]:
    """Wrap a bare object (the `data` of a put) in a put envelope with a fresh event id.

    A bare object without `id` gets a new derived id on every publish; give it an `id` to make
    re-publishing idempotent.
    """
    if looks_like_envelope(obj):
        raise ValueError("already an envelope; publish it as is")
    when = (time or datetime.now(UTC)).astimezone(UTC)
    return {
        "specversion": "1.0",
        "id": event_id or str(uuid.uuid4()),
        "source": source,
        "type": OBJECT_PUT,
        "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "datacontenttype": "application/json",
        "namespace": str(namespace),
        "data": dict(obj),
    }
