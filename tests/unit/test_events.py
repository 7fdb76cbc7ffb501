"""Event envelope/payload parsing: the shared examples parse, every refusal has its stable code."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st

from pipeline.domain.chunking import explicit_part_id, part_id
from pipeline.domain.errors import (
    InvalidEnvelope,
    InvalidInput,
    InvalidPayload,
    MalformedJson,
    PayloadTooLarge,
    UnknownEventType,
)
from schemas.events import (
    LinkDelete,
    LinkPut,
    ObjectPut,
    ObjectSoftDelete,
    derive_object_id,
    looks_like_envelope,
    parse_event,
    record_key,
    wrap_bare_object,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NS = uuid.UUID("8f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b")
A = uuid.UUID("0b9d7c7e-1111-4a2b-8c3d-000000000001")
B = uuid.UUID("0b9d7c7e-1111-4a2b-8c3d-000000000002")


def example_lines() -> list[str]:
    return [line for line in (EXAMPLES / "events.jsonl").read_text().splitlines() if line.strip()]


def envelope(data: Any, /, **overrides: Any) -> dict[str, Any]:
    env: dict[str, Any] = {
        "specversion": "1.0",
        "id": "evt-1",
        "source": "test",
        "type": "brainstream.object.put",
        "time": "2026-11-30T09:00:00Z",
        "datacontenttype": "application/json",
        "namespace": str(NS),
        "data": data,
    }
    env.update(overrides)
    return {k: v for k, v in env.items() if v is not ...}


def raw(env: dict[str, Any]) -> bytes:
    return json.dumps(env).encode()


def test_every_example_event_parses() -> None:
    events = [parse_event(line.encode()) for line in example_lines()]
    assert [type(e.payload) for e in events] == [
        ObjectPut, ObjectPut, ObjectPut, LinkPut, LinkPut, LinkDelete, ObjectSoftDelete,
    ]
    assert events[1].version == 3 and events[0].version is None
    assert all(e.namespace == NS for e in events)
    deal = events[1].payload
    assert isinstance(deal, ObjectPut)
    assert deal.properties == {
        "stage": "prospect", "amount": 420000, "close_date": "2027-02-28T00:00:00Z"
    }
    link = events[3].payload
    assert isinstance(link, LinkPut)
    assert (link.from_id, link.to, link.to_id) == (B, A, A)
    assert link.meta.confidence == 0.95 and link.meta.role == "primary buyer"
    evidence = events[4].payload
    assert isinstance(evidence, LinkPut) and evidence.meta.confidence == 0.0
    assert events[6].object_id == uuid.UUID("0b9d7c7e-1111-4a2b-8c3d-000000000003")


def test_record_keys_of_examples_are_aggregate_ids() -> None:
    keys = [record_key(parse_event(line.encode())) for line in example_lines()]
    assert keys[0] == str(A).encode()
    assert keys[3] == str(B).encode()  # link: its `from`
    assert len(set(keys[2:])) == 2


def test_put_without_id_gets_a_replay_stable_derived_id() -> None:
    body = raw(envelope({"kind": "note", "title": "t"}))
    first, again = parse_event(body), parse_event(body)
    assert first.object_id is not None and first.object_id == again.object_id
    assert isinstance(first.payload, ObjectPut) and first.payload.id == first.object_id
    assert first.object_id == derive_object_id(NS, source="test", event_id="evt-1")
    other_source = parse_event(raw(envelope({"kind": "note"}, source="other")))
    assert other_source.object_id != first.object_id  # CloudEvents ids are unique per source
    other_event = parse_event(raw(envelope({"kind": "note"}, id="evt-2")))
    assert other_event.object_id != first.object_id


def test_explicit_part_without_id_is_addressed_by_parent_and_position() -> None:
    event = parse_event(raw(envelope({"kind": "note", "parent_id": str(A), "position": 2})))
    assert event.object_id == explicit_part_id(NS, A, 2)
    assert event.object_id != part_id(NS, A, 2)  # never a chunk's id
    # derived within the namespace: another tenant's part at the same place has another id
    assert event.object_id != explicit_part_id(uuid.uuid4(), A, 2)
    assert record_key(event) == str(A).encode()


@given(parent=st.uuids(), child=st.uuids(), position=st.integers(0, 10_000))
def test_record_key_of_a_part_is_its_parent_id(
    parent: uuid.UUID, child: uuid.UUID, position: int
) -> None:
    if parent == child:
        return
    data = {"id": str(child), "kind": "note", "parent_id": str(parent), "position": position}
    event = parse_event(raw(envelope(data)))
    assert record_key(event) == str(parent).encode()
    assert event.object_id == child


def test_extension_attributes_are_ignored_and_time_is_optional() -> None:
    env = envelope({"kind": "note"}, time=..., datacontenttype=..., traceparent="00-abc", x=1)
    event = parse_event(raw(env))
    assert event.envelope.time is None
    assert event.envelope.datacontenttype == "application/json"


def test_wrap_bare_object_builds_a_put_that_parses() -> None:
    bare = {"id": str(A), "kind": "company", "title": "Acme"}
    env = wrap_bare_object(bare, NS, "cli")
    assert looks_like_envelope(env) and not looks_like_envelope(bare)
    event = parse_event(raw(env))
    assert event.object_id == A and event.source == "cli"
    assert event.type == "brainstream.object.put" and event.envelope.time is not None
    assert wrap_bare_object(bare, NS, "cli")["id"] != env["id"]
    with pytest.raises(ValueError):
        wrap_bare_object(env, NS, "cli")


def test_bare_object_is_not_an_event() -> None:
    with pytest.raises(InvalidEnvelope) as err:
        parse_event(raw({"id": str(A), "kind": "company"}))
    assert err.value.field == "specversion"


def test_payload_too_large() -> None:
    body = raw(envelope({"kind": "note", "content": "x" * 2000}))
    assert parse_event(body, max_bytes=len(body)).object_id is not None
    with pytest.raises(PayloadTooLarge) as err:
        parse_event(body, max_bytes=len(body) - 1)
    assert err.value.code == "payload_too_large"


@pytest.mark.parametrize(
    "body",
    [b"{", b"", b"\xff\xfe{}", b'{"a": NaN}', b'{"a": 1, "a": 2}', b'{"a": "\\ud800"}',
     b'{"a": 1} {"b": 2}'],
)
def test_malformed_json(body: bytes) -> None:
    with pytest.raises(MalformedJson) as err:
        parse_event(body)
    assert err.value.code == "malformed_json"


@pytest.mark.parametrize(
    ("env", "field"),
    [
        (envelope({"kind": "note"}, specversion="0.3"), "specversion"),
        (envelope({"kind": "note"}, id=""), "id"),
        (envelope({"kind": "note"}, id="   "), "id"),
        (envelope({"kind": "note"}, source=...), "source"),
        (envelope({"kind": "note"}, namespace="not-a-uuid"), "namespace"),
        (envelope({"kind": "note"}, namespace=...), "namespace"),
        (envelope({"kind": "note"}, version=-1), "version"),
        (envelope({"kind": "note"}, version="3"), "version"),
        (envelope({"kind": "note"}, version=True), "version"),
        (envelope({"kind": "note"}, time=1700000000), "time"),
        (envelope({"kind": "note"}, time="2026-11-30T09:00:00"), "time"),
        (envelope({"kind": "note"}, datacontenttype="text/plain"), "datacontenttype"),
        (envelope({"kind": "note"}, type=...), "type"),
        (envelope({"kind": "note"}, type=7), "type"),
        (envelope([1, 2]), "data"),
        (envelope({"kind": "note"}, data=...), "data"),
        (envelope({"kind": "note"}, data_base64="AAAA"), "data_base64"),
        (envelope({"kind": "note"}, source="a\x00b"), "source"),
    ],
)
def test_invalid_envelope(env: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidEnvelope) as err:
        parse_event(raw(env))
    assert err.value.code == "invalid_envelope"
    assert err.value.field == field


def test_json_media_types_with_parameters_are_accepted() -> None:
    for media in ("application/json; charset=utf-8", "application/cloudevents+json"):
        parse_event(raw(envelope({"kind": "note"}, datacontenttype=media)))


def test_non_object_event_is_an_invalid_envelope() -> None:
    with pytest.raises(InvalidEnvelope):
        parse_event(b"[1, 2]")


def test_unknown_event_type() -> None:
    with pytest.raises(UnknownEventType) as err:
        parse_event(raw(envelope({"kind": "note"}, type="brainstream.object.upsert")))
    assert (err.value.code, err.value.field) == ("unknown_event_type", "type")


PUT = "brainstream.object.put"
LINK = "brainstream.link.put"
LINK_OK = {"from": str(A), "to": str(B), "relation_type": "buyer"}


@pytest.mark.parametrize(
    ("type_", "data", "field"),
    [
        (PUT, {"kind": "deal", "properties": {"amount": {"eur": 1}}}, "data.properties.amount"),
        (PUT, {"kind": "deal", "properties": {"tags": ["a", ["b"]]}}, "data.properties.tags"),
        (PUT, {"kind": "deal", "properties": {"tags": ["a", None]}}, "data.properties.tags"),
        (PUT, {"kind": "deal", "properties": {"bad key": 1}}, "data.properties.bad key"),
        (PUT, {"kind": "deal", "properties": {"9lives": 1}}, "data.properties.9lives"),
        (PUT, {"kind": "deal", "properties": []}, "data.properties"),
        (PUT, {"kind": "deal", "colour": "red"}, "data.colour"),
        (PUT, {"title": "no kind"}, "data.kind"),
        (PUT, {"kind": ""}, "data.kind"),
        (PUT, {"kind": "sales deal"}, "data.kind"),
        (PUT, {"kind": "deal\n"}, "data.kind"),
        (PUT, {"kind": "deal", "id": "nope"}, "data.id"),
        (PUT, {"kind": "deal", "title": 5}, "data.title"),
        (PUT, {"kind": "deal", "content": "a\x00b"}, "data.content"),
        (PUT, {"kind": "note", "parent_id": str(A)}, "data.position"),
        (PUT, {"kind": "note", "parent_id": str(A), "position": -1}, "data.position"),
        (PUT, {"kind": "note", "parent_id": str(A), "position": 1.0}, "data.position"),
        (PUT, {"kind": "note", "position": 0}, "data.position"),
        (PUT, {"kind": "note", "id": str(A), "parent_id": str(A), "position": 0},
         "data.parent_id"),
        ("brainstream.object.soft_delete", {}, "data.id"),
        ("brainstream.object.soft_delete", {"id": str(A), "hard": True}, "data.hard"),
        (LINK, {**LINK_OK, "relation_type": "works-for"}, "data.relation_type"),
        (LINK, {**LINK_OK, "relation_type": "1st"}, "data.relation_type"),
        (LINK, {**LINK_OK, "to": str(A)}, "data.to"),
        (LINK, {"to": str(B), "relation_type": "buyer"}, "data.from"),
        (LINK, {**LINK_OK, "from_id": str(A)}, "data.from_id"),
        (LINK, {**LINK_OK, "meta": {"confidence": 1.5}}, "data.meta.confidence"),
        (LINK, {**LINK_OK, "meta": {"confidence": True}}, "data.meta.confidence"),
        (LINK, {**LINK_OK, "meta": {"confidence": "0.5"}}, "data.meta.confidence"),
        (LINK, {**LINK_OK, "meta": {"evidence_id": "x"}}, "data.meta.evidence_id"),
        (LINK, {**LINK_OK, "meta": {"weight": 1}}, "data.meta.weight"),
        ("brainstream.link.delete", {**LINK_OK, "meta": {}}, "data.meta"),
    ],
)
def test_invalid_payload(type_: str, data: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidPayload) as err:
        parse_event(raw(envelope(data, type=type_)))
    assert err.value.code == "invalid_payload"
    assert err.value.field == field


def test_property_values_may_be_scalars_null_or_scalar_lists() -> None:
    props = {"s": "x", "i": 1, "f": 0.5, "b": False, "n": None, "l": ["a", 1, True], "_u": []}
    event = parse_event(raw(envelope({"kind": "deal", "properties": props})))
    assert isinstance(event.payload, ObjectPut) and event.payload.properties == props


def test_link_meta_confidence_accepts_integers_and_null() -> None:
    for given_, expected in ((1, 1.0), (0, 0.0), (None, 0.0)):
        event = parse_event(
            raw(envelope({**LINK_OK, "meta": {"confidence": given_}}, type=LINK))
        )
        assert isinstance(event.payload, LinkPut)
        assert event.payload.meta.confidence == expected


def test_every_refusal_is_invalid_input_with_a_stable_code() -> None:
    codes = set()
    for body in (b"{", raw(envelope({"kind": "x"}, type="nope")), raw({"a": 1}),
                 raw(envelope({"kind": "x", "z": 1}))):
        with pytest.raises(InvalidInput) as err:
            parse_event(body)
        codes.add(err.value.to_dict()["code"])
    with pytest.raises(InvalidInput) as err:
        parse_event(b"{}", max_bytes=1)
    codes.add(err.value.code)
    assert codes == {
        "malformed_json", "unknown_event_type", "invalid_envelope", "invalid_payload",
        "payload_too_large",
    }
