"""`POST /v1/events`'s admission (pipeline/kafka/event_writes.py), pure logic: the caller's
envelope completed with its defaults, refused with the field named inside the request."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from pipeline.domain.errors import InvalidInput, NamespaceForbidden
from pipeline.domain.kinds import KindCatalog, load_catalog
from pipeline.kafka.event_writes import DEFAULT_SOURCE, admit

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


def test_defaults_fill_what_the_caller_left_out() -> None:
    [one] = admit([_put()], NS, CATALOG, max_bytes=1_000_000)
    assert one.envelope["namespace"] == str(NS)
    assert (one.source, one.envelope["specversion"]) == (DEFAULT_SOURCE, "1.0")
    assert uuid.UUID(one.event_id).version == 4
    assert one.envelope["time"].endswith("Z")
    given = admit([{**_put(), "id": "e-1", "source": "crm", "namespace": str(NS).upper()}],
                  NS, CATALOG, max_bytes=1_000_000)[0]
    assert (given.event_id, given.source) == ("e-1", "crm")


@pytest.mark.parametrize(("event", "field", "error"), [
    (_put(kind="nope"), "events.1.data.kind", InvalidInput),
    (_put(properties={}), "events.1.data.properties.stage", InvalidInput),
    ({**_put(), "namespace": "not-a-uuid"}, "events.1.namespace", InvalidInput),
    ({**_put(), "namespace": str(uuid.uuid4())}, "events.1.namespace", NamespaceForbidden),
    ({**_put(), "type": "brainstream.entity.merge"}, "events.1.type", InvalidInput),
    ({**_put(), "specversion": "0.3"}, "events.1.specversion", InvalidInput),
    (["not", "an", "envelope"], "events.1", InvalidInput),
])
def test_a_bad_event_is_named_by_its_place_in_the_request(
        event: Any, field: str, error: type[Exception]) -> None:
    with pytest.raises(error) as raised:
        admit([_put(), event], NS, CATALOG, max_bytes=1_000_000)
    assert getattr(raised.value, "field", None) == field
