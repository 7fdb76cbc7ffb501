"""Bodies of `GET /v1/entities/{id}/facts`: an entity's RELATES facts as of a time."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, Field


class FactEndOut(BaseModel):
    id: uuid.UUID
    name: str
    label: str


class StatingRowOut(BaseModel):
    row_id: uuid.UUID = Field(description="The row (object or part) whose put states the fact.")
    object_id: uuid.UUID = Field(description="Its object.")


class FactOut(BaseModel):
    subject: FactEndOut
    predicate: str
    object: FactEndOut
    valid_from: datetime | None = Field(description="When it began to hold (null: always).")
    valid_to: datetime | None = Field(
        description="When it stopped holding (null: still); for a functional predicate, cut "
                    "where the subject's next fact of that predicate begins.")
    recorded_at: datetime = Field(description="When the system first learned it.")
    stated_by: list[StatingRowOut]


class FactsOut(BaseModel):
    entity_id: uuid.UUID
    as_of: datetime
    known_at: datetime
    facts: list[FactOut]
    truncated: bool = False
