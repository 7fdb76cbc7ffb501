"""`brainstream.objects.soft_delete`'s payload: a delete is narrowed by a source or a filter, or
asks for everything by name; a refusal names the request's field; its filters become the
search's `Filters`; its record key is the namespace (one partition for a namespace's deletes)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from pipeline.domain.errors import InvalidInput
from pipeline.domain.read_model import Filters
from schemas.deletes import parse_delete
from schemas.events import parse_event, record_key


@pytest.mark.parametrize(("data", "field"), [
    ({}, "source"), ({"filters": {}}, "source"), ({"source": "  "}, "source"),
    ({"all": True, "source": "crm"}, "all"), ({"all": True, "filters": {"kind": "deal"}}, "all"),
    ({"source": "crm", "extra": 1}, "extra"),
    ({"filters": {"stage": {"nested": 1}}}, "filters.stage"),
])
def test_a_delete_that_says_nothing_or_too_much_is_refused_naming_the_field(
        data: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_delete(data)
    assert (refused.value.field or "").startswith(field)


def test_filters_become_the_searchs_filters() -> None:
    payload = parse_delete({"source": "crm", "filters": {
        "kind": ["deal"], "stage": ["won", "lost"], "amount": 5,
        "created_before": "2020-01-01T00:00:00Z"}})
    filters = payload.selection_filters()
    assert filters.kinds == ("deal",)
    assert filters.properties == (("amount", (5,)), ("stage", ("won", "lost")))
    assert filters.created_before is not None and filters.created_before.year == 2020
    assert parse_delete({"all": True}).selection_filters() == Filters()


def test_the_event_parses_and_is_keyed_by_its_namespace() -> None:
    ns = uuid.uuid4()
    event = parse_event(json.dumps({
        "specversion": "1.0", "id": "d1", "source": "ops", "namespace": str(ns),
        "type": "brainstream.objects.soft_delete", "data": {"source": "crm"}}))
    assert record_key(event) == str(ns).encode()
    assert event.object_id is None
