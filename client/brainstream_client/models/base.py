"""The two kinds of model: request bodies (strict, like the API's: an unknown field is a
mistake caught before sending) and answers (lenient: a field a newer API adds is ignored, so an
older client keeps working)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Body(BaseModel):
    """A request body."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Answer(BaseModel):
    """A response body."""

    model_config = ConfigDict(populate_by_name=True)
