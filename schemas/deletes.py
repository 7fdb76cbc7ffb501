"""The `data` model of `brainstream.objects.soft_delete`: soft-delete the first-class objects of
the event's namespace that one publisher put (`source`), that match a search filter (`filters`,
the shape of the search API's `filters`), both, or, only when asked in so many words, all of them
(`all: true`). The set is what matches when the consumer applies the event
(pipeline/ingest/deletes.py); registered with the other payloads in `schemas.payloads`.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Annotated, Any, Final

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationError,
    model_validator,
)

from pipeline.domain.conditions import MAX_WHERE_LEAVES, SEARCH, parse_conditions
from pipeline.domain.errors import InvalidInput
from pipeline.domain.read_model import Filters
from schemas.limits import EVENT_SOURCE_MAX, PROPERTY_STRING_MAX, TITLE_MAX

OBJECTS_SOFT_DELETE: Final = "brainstream.objects.soft_delete"

# A filter value: what a property holds (a list value matches when it holds one of them).
FilterScalar = (Annotated[StrictStr, Field(max_length=PROPERTY_STRING_MAX)] | StrictBool
                | int | Annotated[float, Field(allow_inf_nan=False)])
KindName = Annotated[StrictStr, Field(max_length=TITLE_MAX)]
FilterValue = FilterScalar | Annotated[list[FilterScalar], Field(min_length=1, max_length=100)]


class DeleteFilters(BaseModel):
    """The search API's `filters`: `{kind?, title?, created_after?, created_before?,
    updated_after?, updated_before?, <property>: value | [values]}`, judged on the first-class
    object. Property names are checked against the kind catalog when the event is applied."""

    model_config = ConfigDict(extra="allow", frozen=True, title="DeleteFilters")
    __pydantic_extra__: dict[str, FilterValue]

    kind: KindName | Annotated[list[KindName], Field(max_length=100)] | None = None
    title: Annotated[StrictStr, Field(max_length=TITLE_MAX)] | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None

    def to_filters(self) -> Filters:
        """The read side's `Filters` (as the search API makes them from its body)."""
        return Filters.of_body(self.kind, self.title, self.created_after, self.created_before,
                               self.updated_after, self.updated_before, self.model_extra)


class ObjectsSoftDelete(BaseModel):
    """`data` of `brainstream.objects.soft_delete`: soft-delete the namespace's first-class
    objects (with their parts) whose last put came from `source` and that match `filters`
    (both when both are given), as they are when the event is applied; objects put later are
    not touched. One event deletes at most 10,000 objects, the first in id order: send another
    for the rest. `all: true`, alone, matches every object; without it, `source` or a non-empty
    `filters` is required."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="ObjectsSoftDelete")

    source: Annotated[StrictStr, Field(min_length=1, max_length=EVENT_SOURCE_MAX,
                                       pattern=r"\S")] | None = None
    filters: DeleteFilters | None = None
    # the search's `where` conditions (pipeline/domain/conditions.py), judged on the object
    where: dict[str, Any] | None = None
    all: StrictBool = False

    @model_validator(mode="after")
    def _says_what(self) -> ObjectsSoftDelete:
        # "Delete everything" must be asked for by name, never reached by forgetting a field.
        narrowed = (self.source is not None or self.where is not None
                    or (self.filters is not None and not self.filters.to_filters().empty))
        if self.all and narrowed:
            raise ValueError("`all` matches every object: give it alone, or give source/filters"
                             " without it")
        if not self.all and not narrowed:
            raise ValueError("give `source`, a non-empty `filters`, or `all: true` to delete "
                             "every object of the namespace")
        return self

    def selection_filters(self) -> Filters:
        """The filters and `where` as the read side takes them (none: `Filters()`); a bad
        `where` raises InvalidInput naming its field."""
        filters = self.filters.to_filters() if self.filters is not None else Filters()
        if self.where is None:
            return filters
        return replace(filters, where=parse_conditions(self.where, max_leaves=MAX_WHERE_LEAVES,
                                                       grammar=SEARCH))


DELETE_PAYLOAD_MODELS: Final[dict[str, type[ObjectsSoftDelete]]] = {
    OBJECTS_SOFT_DELETE: ObjectsSoftDelete,
}


def parse_delete(data: dict[str, Any]) -> ObjectsSoftDelete:
    """A request's delete (the API's body, the CLI's options) validated as the consumer will
    validate the event: `InvalidInput` naming the request's field (`source` when nothing
    narrows the delete, `all` beside a narrowing, `filters.<name>` for a bad value)."""
    try:
        return ObjectsSoftDelete.model_validate(data)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in error["loc"]) or ("all" if data.get("all") else "source")
        raise InvalidInput(f"{field}: {error['msg']}", field=field) from None
