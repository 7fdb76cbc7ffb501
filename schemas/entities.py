"""The `data` model of the entity layer's one event: a curator's decision on two entities.

Entities are derived from the content, but a person's decision about them (these two are one;
these two are not) is not: it is recorded on the input topic like every other fact, so a replay
into a new generation applies it again (docs/entities.md). The API's curator routes
publish it (`POST /v1/entities/merge`, `POST /v1/entities/possibly_same/{from}/{to}`); a
publisher trusted with a namespace may too. Registered with the other payloads in
`schemas.payloads`; the record key is `from` (`schemas.events.record_key`).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationInfo, field_validator

from schemas.limits import DECIDED_BY_MAX, NOTE_MAX

ENTITY_DECISION: Final = "brainstream.entity.decision"


class EntityDecision(BaseModel):
    """`data` of `brainstream.entity.decision`: `merge` entity `from` into `to`; `verify` the
    pair (the same: `from` is merged into `to`, the pair recorded as verified); `refuse` it (the
    two are different: never proposed nor merged again); `defer` it (undecided still: the pair
    leaves the queue of held pairs for the deferred ones until a verify or refuse). Entity ids
    are derived from the namespace, name and label class, so they name the same entities in
    every generation."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="EntityDecision",
                              populate_by_name=True)

    decision: Literal["merge", "verify", "refuse", "defer"]
    from_id: UUID = Field(alias="from")
    to: UUID
    decided_by: Annotated[StrictStr, Field(min_length=1, max_length=DECIDED_BY_MAX,
                                           pattern=r"\S")]
    note: Annotated[StrictStr, Field(max_length=NOTE_MAX)] | None = None

    @field_validator("to")
    @classmethod
    def _two_entities(cls, value: UUID, info: ValidationInfo) -> UUID:
        if value == info.data.get("from_id"):
            raise ValueError("a decision needs two different entities")
        return value


ENTITY_PAYLOAD_MODELS: Final[dict[str, type[EntityDecision]]] = {ENTITY_DECISION: EntityDecision}
