"""An entity's RELATES facts as of a time (the API's `api/fact_schemas.py`)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from brainstream_client.models.base import Answer


class FactEndOut(Answer):
    id: UUID
    name: str
    label: str


class StatingRowOut(Answer):
    row_id: UUID
    object_id: UUID


class FactOut(Answer):
    subject: FactEndOut
    predicate: str
    object: FactEndOut
    valid_from: datetime | None
    valid_to: datetime | None
    recorded_at: datetime
    stated_by: list[StatingRowOut]


class FactsOut(Answer):
    entity_id: UUID
    as_of: datetime
    known_at: datetime
    facts: list[FactOut]
    truncated: bool = False
