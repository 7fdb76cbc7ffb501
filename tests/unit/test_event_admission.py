"""`POST /v1/events`'s admission (pipeline/kafka/event_writes.py), pure logic: the caller's
envelope completed with its defaults (the key's source, ids derived from an Idempotency-Key),
refused with the field named inside the request."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from pipeline.domain.errors import (
    IdempotencyRequired,
    InvalidInput,
    NamespaceForbidden,
    ScopeRequired,
    SourceNotAllowed,
)
from pipeline.domain.kinds import KindCatalog, load_catalog
from pipeline.kafka.event_writes import Publisher, admit, idempotency_key

NS = uuid.uuid4()
CATALOG = KindCatalog(load_catalog("""
kinds:
  - kind: deal
    fields:
      - {name: stage, type: string, required: true, operators: [eq]}
"""))


def _put(**data: Any) -> dict[str, Any]:
    return {"type": "brainstream.object.put", "data": {"kind": "deal", "title": "t",
                                                       "properties": {"stage": "won"}, **data}}


WRITER = Publisher("crm-sync", may_version=False, idempotency_key="req-1")
ADMIN = Publisher("ops", may_version=True)


def _admit(events: list[Any], publisher: Publisher = WRITER) -> list[Any]:
    return admit(events, NS, CATALOG, max_bytes=1_000_000, publisher=publisher)


def test_defaults_fill_what_the_caller_left_out() -> None:
    [one] = _admit([_put()])
    assert one.envelope["namespace"] == str(NS)
    assert (one.source, one.envelope["specversion"]) == ("api:crm-sync", "1.0")
    assert one.envelope["time"].endswith("Z")
    given = _admit([{**_put(), "id": "e-1", "source": "api:crm-sync",
                     "namespace": str(NS).upper()}])[0]
    assert (given.event_id, given.source) == ("e-1", "api:crm-sync")


def test_ids_derived_from_an_idempotency_key_repeat_on_a_retry() -> None:
    first = [a.event_id for a in _admit([_put(), _put(), {**_put(), "id": "mine"}])]
    again = [a.event_id for a in _admit([_put(), _put(), {**_put(), "id": "mine"}])]
    assert first == again and len(set(first)) == 3 and first[2] == "mine"
    other = Publisher("crm-sync", may_version=False, idempotency_key="req-2")
    assert _admit([_put()], other)[0].event_id != first[0]
    another_key = Publisher("other", may_version=False, idempotency_key="req-1")
    assert _admit([_put()], another_key)[0].event_id != first[0]


def test_an_event_without_id_needs_an_idempotency_key() -> None:
    bare = Publisher("crm-sync", may_version=False)
    with pytest.raises(IdempotencyRequired) as raised:
        _admit([{**_put(), "id": "e-1"}, _put()], bare)
    assert raised.value.field == "events.1.id"


def test_version_takes_the_admin_scope() -> None:
    with pytest.raises(ScopeRequired) as raised:
        _admit([{**_put(), "version": 3}])
    assert raised.value.field == "events.0.version"
    [one] = _admit([{**_put(), "id": "e-2", "version": 3}], ADMIN)
    assert one.envelope["version"] == 3 and one.source == "api:ops"
    with pytest.raises(InvalidInput) as raised:  # the bigint column's range, admin or not
        _admit([{**_put(), "id": "e-3", "version": 2**63}], ADMIN)
    assert raised.value.field == "events.0.version"


@pytest.mark.parametrize("value", ["", " ", "x" * 201, "caf\u00e9", "a\nb"])
def test_a_bad_idempotency_key_is_refused(value: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        idempotency_key(value)
    assert raised.value.field == "Idempotency-Key"


@pytest.mark.parametrize(("event", "field", "error"), [
    (_put(kind="nope"), "events.1.data.kind", InvalidInput),
    (_put(properties={}), "events.1.data.properties.stage", InvalidInput),
    ({**_put(), "namespace": "not-a-uuid"}, "events.1.namespace", InvalidInput),
    ({**_put(), "namespace": str(uuid.uuid4())}, "events.1.namespace", NamespaceForbidden),
    ({**_put(), "type": "brainstream.entity.merge"}, "events.1.type", InvalidInput),
    ({**_put(), "specversion": "0.3"}, "events.1.specversion", InvalidInput),
    (["not", "an", "envelope"], "events.1", InvalidInput),
    ({**_put(), "source": "crm"}, "events.1.source", SourceNotAllowed),
    ({**_put(), "version": 2**63}, "events.1.version", ScopeRequired),
])
def test_a_bad_event_is_named_by_its_place_in_the_request(
        event: Any, field: str, error: type[Exception]) -> None:
    with pytest.raises(error) as raised:
        _admit([_put(), event])
    assert getattr(raised.value, "field", None) == field
