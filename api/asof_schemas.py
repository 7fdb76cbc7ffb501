"""The as-of fields of the graph reads (expand, expand_many, recipes, find_links, paths): a
world time and a system time, both optional, both RFC 3339 with an offset (a naive time is a
422 naming the field)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AwareDatetime, Field

from pipeline.domain.read_model import AsOf

AsOfTime = Annotated[AwareDatetime | None, Field(description=(
    "world time: answer with the links that held at this time (their versions' validity);"
    " omitted with `known_at` given: now. Omit both for the current graph"))]
KnownAtTime = Annotated[AwareDatetime | None, Field(description=(
    "system time: answer as the system knew it at this time (versions recorded by then and"
    " not yet invalidated); omitted, or later than now: as known now"))]


def as_of_point(as_of: datetime | None, known_at: datetime | None) -> AsOf | None:
    """The point a body names, or None when it names neither time (the current state)."""
    return AsOf.of(as_of, known_at, datetime.now(UTC))
