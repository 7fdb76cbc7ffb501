"""The event types and the `data` model of each: what a put, a soft delete, a link put and a
link delete carry, validated strictly (unknown fields, nested property values, self-links and
parts without a position are refused). The memory events' models are in `schemas.memory`, the
entity decision's in `schemas.entities`, the delete by source or filter's in `schemas.deletes`.

`schemas.events` wraps these in the CloudEvents envelope and parses raw records into them.
"""

from __future__ import annotations

import math
import uuid
from datetime import datetime
from typing import Annotated, Any, Final, Literal, TypeAlias

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
)

from pipeline.domain.kinds import KIND_PATTERN, PROPERTY_KEY_PATTERN
from pipeline.domain.relations import RELATION_TYPE_PATTERN
from schemas.deletes import DELETE_PAYLOAD_MODELS, ObjectsSoftDelete
from schemas.entities import ENTITY_PAYLOAD_MODELS, EntityDecision
from schemas.limits import (
    CONTENT_MAX,
    LINK_LABEL_MAX,
    MEDIA_TYPE_MAX,
    NOTE_MAX,
    PROPERTIES_MAX,
    PROPERTY_LIST_MAX,
    PROPERTY_STRING_MAX,
    STRUCTURE_ENTITIES_MAX,
    STRUCTURE_LABEL_MAX,
    STRUCTURE_NAME_MAX,
    STRUCTURE_RELATIONS_MAX,
    STRUCTURE_SPANS_MAX,
    SUMMARY_MAX,
    TITLE_MAX,
)
from schemas.memory import MEMORY_PAYLOAD_MODELS, MemoryPayload

OBJECT_PUT: Final = "brainstream.object.put"
OBJECT_SOFT_DELETE: Final = "brainstream.object.soft_delete"
LINK_PUT: Final = "brainstream.link.put"
LINK_DELETE: Final = "brainstream.link.delete"
EventType: TypeAlias = Literal[
    "brainstream.object.put", "brainstream.object.soft_delete",
    "brainstream.link.put", "brainstream.link.delete",
    # the objects of a source or matching a filter (schemas/deletes.py)
    "brainstream.objects.soft_delete",
    # conversation memory (schemas/memory.py)
    "brainstream.session.put", "brainstream.session.delete", "brainstream.messages.add",
    "brainstream.message.metadata", "brainstream.summary.put",
    # a curator's decision on two entities (schemas/entities.py)
    "brainstream.entity.decision",
]


def _check_property_value(value: Any) -> Any:
    def scalar(v: Any) -> bool:
        if isinstance(v, float):
            return math.isfinite(v)
        return isinstance(v, str | int | bool)

    if isinstance(value, list) and len(value) > PROPERTY_LIST_MAX:
        raise ValueError(f"a list property value has at most {PROPERTY_LIST_MAX} items")
    items = value if isinstance(value, list) else [value]
    if any(isinstance(v, str) and len(v) > PROPERTY_STRING_MAX for v in items):
        raise ValueError(f"a string property value has at most {PROPERTY_STRING_MAX} characters")
    if value is None or scalar(value):
        return value
    if isinstance(value, list) and all(scalar(v) for v in value):
        return value
    raise ValueError(
        "a property value is a string, number, boolean, null, or a list of "
        "strings/numbers/booleans; nested objects are not allowed"
    )


_SCALAR_SCHEMA: dict[str, Any] = {"type": ["string", "number", "boolean"],
                                  "maxLength": PROPERTY_STRING_MAX}
PropertyValue = Annotated[
    Any,
    AfterValidator(_check_property_value),
    Field(json_schema_extra={"anyOf": [
        _SCALAR_SCHEMA, {"type": "null"},
        {"type": "array", "items": _SCALAR_SCHEMA, "maxItems": PROPERTY_LIST_MAX}]}),
]
PropertyKey = Annotated[str, Field(pattern=PROPERTY_KEY_PATTERN)]
MediaType = Annotated[StrictStr, Field(max_length=MEDIA_TYPE_MAX)]


# The longest vector a put may carry (the widest embedding models have a few thousand
# dimensions; pgvector's HNSW index takes 2,000, its columns 16,000).
VECTOR_MAX_DIMS = 16000
FiniteFloat = Annotated[StrictFloat | StrictInt, Field(allow_inf_nan=False)]


class PutVector(BaseModel):
    """An object's own vector, computed by the publisher with the index generation's model."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="PutVector")

    model: Annotated[StrictStr, Field(min_length=1, max_length=200)]
    values: Annotated[list[FiniteFloat], Field(min_length=1, max_length=VECTOR_MAX_DIMS)]


class StructureSpan(BaseModel):
    """Characters [start, end) of one text field of the put (`content`: the whole content, also
    when it is cut into parts)."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="StructureSpan")

    field: Literal["title", "summary", "content"]
    start: Annotated[StrictInt, Field(ge=0)]
    end: Annotated[StrictInt, Field(ge=1)]


StructureName = Annotated[StrictStr, Field(min_length=1, max_length=STRUCTURE_NAME_MAX)]


class StructureEntity(BaseModel):
    """An entity the publisher names in the put, with the spans that mention it."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="StructureEntity")

    name: StructureName
    label: Annotated[StrictStr, Field(min_length=1, max_length=STRUCTURE_LABEL_MAX)] | None = None
    spans: Annotated[list[StructureSpan], Field(min_length=1, max_length=STRUCTURE_SPANS_MAX)]


class StructureRelation(BaseModel):
    """`subject -predicate-> object` between two entities of the put, stated by the row holding
    `span` (the object itself without one), holding from `valid_from` until `valid_to`."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="StructureRelation")

    subject: StructureName
    predicate: StructureName
    object: StructureName
    span: StructureSpan | None = None
    valid_from: AwareDatetime | None = None
    valid_to: AwareDatetime | None = None


class ObjectPut(BaseModel):
    """`data` of `brainstream.object.put`: a first-class object, or a part when `parent_id` is set.

    Without `id`, a part gets `explicit_part_id(namespace, parent_id, position)` and any other
    object an id derived from its event (`derive_object_id`), so a replay yields the same id.
    An id another namespace already owns is refused (`id_owned_by_other_namespace`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, title="ObjectPut")

    id: uuid.UUID | None = None
    kind: Annotated[StrictStr, Field(pattern=KIND_PATTERN)]
    title: Annotated[StrictStr, Field(max_length=TITLE_MAX)] | None = None
    summary: Annotated[StrictStr, Field(max_length=SUMMARY_MAX)] | None = None
    properties: dict[PropertyKey, PropertyValue] = Field(
        default_factory=dict, max_length=PROPERTIES_MAX,
        json_schema_extra={"additionalProperties": False},
    )
    content: Annotated[StrictStr, Field(max_length=CONTENT_MAX)] | None = None
    content_type: MediaType | None = None
    parent_id: uuid.UUID | None = None
    position: Annotated[StrictInt, Field(ge=0)] | None = Field(default=None, validate_default=True)
    # the dense channel's vector of the row this put writes, instead of the model's; checked
    # against the generation's model name and dimension when applied (docs/search-similar.md)
    vector: PutVector | None = None
    # the publisher's own entities and relations (docs: the entity layer); None: the extractor
    # reads the rows, a list (even empty): these are the rows' entities, checked by
    # `pipeline/domain/structure.py` (`structure_invalid`)
    entities: Annotated[list[StructureEntity],
                        Field(max_length=STRUCTURE_ENTITIES_MAX)] | None = None
    relations: Annotated[list[StructureRelation],
                         Field(max_length=STRUCTURE_RELATIONS_MAX)] | None = None

    @field_validator("parent_id")
    @classmethod
    def _not_own_parent(cls, value: uuid.UUID | None, info: ValidationInfo) -> uuid.UUID | None:
        if value is not None and value == info.data.get("id"):
            raise ValueError("an object cannot be its own parent")
        return value

    @field_validator("position")
    @classmethod
    def _position_iff_part(cls, value: int | None, info: ValidationInfo) -> int | None:
        # A part without a position could not be ordered; a position without a parent means
        # nothing. Only checked when parent_id itself was valid.
        if "parent_id" not in info.data:
            return value
        is_part = info.data["parent_id"] is not None
        if is_part and value is None:
            raise ValueError("a part (parent_id set) needs a position")
        if not is_part and value is not None:
            raise ValueError("position is only allowed on a part (with parent_id)")
        return value


class ObjectSoftDelete(BaseModel):
    """`data` of `brainstream.object.soft_delete`."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="ObjectSoftDelete")

    id: uuid.UUID


def _none_is_unset(value: Any) -> Any:
    return 0.0 if value is None else value


class LinkMeta(BaseModel):
    """Edge metadata. `confidence` 0 means "unset"; otherwise it is in (0, 1]."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="LinkMeta")

    note: Annotated[StrictStr, Field(max_length=NOTE_MAX)] | None = None
    status: Annotated[StrictStr, Field(max_length=LINK_LABEL_MAX)] | None = None
    role: Annotated[StrictStr, Field(max_length=LINK_LABEL_MAX)] | None = None
    confidence: Annotated[StrictFloat, Field(ge=0.0, le=1.0), BeforeValidator(_none_is_unset)] = 0.0
    evidence_id: uuid.UUID | None = None


class _LinkEnds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    from_id: uuid.UUID = Field(alias="from")
    to: uuid.UUID
    relation_type: Annotated[StrictStr, Field(pattern=RELATION_TYPE_PATTERN)]

    @field_validator("to")
    @classmethod
    def _not_self(cls, value: uuid.UUID, info: ValidationInfo) -> uuid.UUID:
        # A self-loop is never a meaningful relation here and would make graph walks revisit.
        if value == info.data.get("from_id"):
            raise ValueError("a link cannot point from an object to itself")
        return value

    @property
    def to_id(self) -> uuid.UUID:
        """The `to` endpoint (named like `from_id`)."""
        return self.to


def _rfc3339(value: Any) -> Any:
    # Lax datetime parsing would read a bare number as a Unix timestamp; we take RFC 3339 only.
    if not isinstance(value, str):
        raise ValueError("a time must be an RFC 3339 string with an offset")
    return value


# A world time (when a link held): RFC 3339 with an offset; a naive time is refused.
ValidTime: TypeAlias = Annotated[AwareDatetime, BeforeValidator(_rfc3339)]


class LinkPut(_LinkEnds):
    """`data` of `brainstream.link.put`: a typed, directed edge with metadata, holding in the
    world from `valid_from` (None: always) until `valid_to` (None: still)."""

    model_config = ConfigDict(title="LinkPut")

    meta: LinkMeta = Field(default_factory=LinkMeta)
    valid_from: ValidTime | None = None
    valid_to: ValidTime | None = None

    @field_validator("valid_to")
    @classmethod
    def _after_from(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        start = info.data.get("valid_from")
        if value is not None and start is not None and value <= start:
            raise ValueError("valid_to must be after valid_from")
        return value


class LinkDelete(_LinkEnds):
    """`data` of `brainstream.link.delete`: the link stopped holding at `valid_to` (None: the
    event's record time); `retract` withdraws it instead, as if it never held (every believed
    version invalidated)."""

    model_config = ConfigDict(title="LinkDelete")

    valid_to: ValidTime | None = None
    retract: StrictBool = False


Payload: TypeAlias = (ObjectPut | ObjectSoftDelete | LinkPut | LinkDelete | MemoryPayload
                      | EntityDecision | ObjectsSoftDelete)
PAYLOAD_MODELS: Final[dict[str, type[Payload]]] = {
    OBJECT_PUT: ObjectPut, OBJECT_SOFT_DELETE: ObjectSoftDelete,
    LINK_PUT: LinkPut, LINK_DELETE: LinkDelete, **MEMORY_PAYLOAD_MODELS,
    **ENTITY_PAYLOAD_MODELS, **DELETE_PAYLOAD_MODELS,
}
