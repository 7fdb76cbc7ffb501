"""Fuzzing the event parser and the front of the write path (issue 10): whatever bytes, JSON,
headers and timestamp a record carries, `parse_event` raises nothing but its documented
rejections and `apply_batch` nothing at all; every rejection carries its stable code."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from pipeline.domain.errors import (
    ForgedReplayMarker,
    InvalidEnvelope,
    InvalidInput,
    InvalidPayload,
    InvalidRecordTime,
    MalformedJson,
    PayloadTooLarge,
    UnknownEventType,
)
from pipeline.domain.kinds import KindCatalog
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import IngestOptions, RawRecord
from pipeline.kafka.markers import H_MARKER, marker_record
from schemas.events import ParsedEvent, parse_event

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "events.jsonl"
PARSER_REJECTIONS = {PayloadTooLarge: "payload_too_large", MalformedJson: "malformed_json",
                     InvalidEnvelope: "invalid_envelope", UnknownEventType: "unknown_event_type",
                     InvalidPayload: "invalid_payload"}
RECORD_REJECTIONS = {**PARSER_REJECTIONS, ForgedReplayMarker: "forged_replay_marker",
                     InvalidRecordTime: "invalid_record_time"}
MAX_BYTES = 20_000
FUZZ = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Any text, lone surrogates and NULs included.
texts = st.text(st.characters(blacklist_categories=()), max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12)


def _examples() -> list[dict[str, Any]]:
    return [json.loads(line) for line in EXAMPLES.read_text().splitlines()]


@st.composite
def mutated_events(draw: st.DrawFn) -> bytes:
    """An example event with some envelope or payload fields replaced, dropped or added: deep
    enough to reach the payload models, wrong enough to hit their every check."""
    event = dict(draw(st.sampled_from(_examples())))
    data = dict(event["data"])
    for _ in range(draw(st.integers(0, 3))):
        target = draw(st.sampled_from(["envelope", "data"]))
        fields = event if target == "envelope" else data
        name = draw(st.sampled_from(sorted(fields)) | texts if fields else texts)
        if draw(st.booleans()):
            fields[name] = draw(json_values | st.text(max_size=300) | st.sampled_from(
                ["x" * 257, "t" * 2_001, "brainstream.link.put", str(uuid.uuid4()), "\x00"]))
        else:
            fields.pop(name, None)
    event = {**event, "data": data} if isinstance(event.get("data"), dict) else event
    return json.dumps(event).encode("utf-8", "surrogatepass")


def _parse(raw: bytes) -> ParsedEvent | str:
    """The event, or the code of its rejection (anything else raised fails the test)."""
    try:
        return parse_event(raw, max_bytes=MAX_BYTES)
    except InvalidInput as exc:
        assert PARSER_REJECTIONS[type(exc)] == exc.code and exc.message
        return exc.code


@FUZZ
@given(st.binary(max_size=2_000))
def test_arbitrary_bytes(raw: bytes) -> None:
    _parse(raw)


@FUZZ
@given(json_values)
def test_arbitrary_json(value: Any) -> None:
    _parse(json.dumps(value).encode("utf-8", "surrogatepass"))


@FUZZ
@given(mutated_events())
def test_mutated_example_events(raw: bytes) -> None:
    _parse(raw)


@given(st.integers(1, 5), st.integers(1, 2_000))
def test_pathological_json(size: int, depth: int) -> None:
    for raw in (b"[" * depth, b"1" * (size * 2_000), b'{"a":' * depth + b"1" + b"}" * depth,
                b"x" * (MAX_BYTES + size)):
        assert isinstance(_parse(raw), str)


class _Store:
    """An `EventStore` that takes every event for a duplicate: the batch stops right after
    reading each record, which is what is fuzzed here."""

    def load_catalog(self) -> KindCatalog:
        return KindCatalog([])

    def set_event_time(self, at: Any) -> None:
        pass

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        yield

    def claim_event(self, *args: Any) -> bool:
        return False

    # a run of puts (pipeline/ingest/bulk.py): no object exists, every claim is a duplicate
    def lock_objects(self, ids: Any) -> dict[Any, Any]:
        return {}

    def claim_events(self, events: Any) -> set[Any]:
        return set()

    def upsert_objects(self, rows: Any) -> list[Any]:
        assert not rows  # nothing was claimed
        return []

    def due_deferred(self, limit: int) -> list[Any]:
        return []

    def flush(self) -> None:
        pass


_, MARKER, MARKER_HEADERS = marker_record(3, 0)
headers = st.lists(st.tuples(st.sampled_from([H_MARKER, "traceparent"]) | texts,
                             st.binary(max_size=20) | st.just(b"3")), max_size=3)
values = st.binary(max_size=500) | mutated_events() | st.just(MARKER) | st.builds(
    lambda cut: MARKER[:cut] + MARKER[cut + 1:], st.integers(0, len(MARKER) - 1))
timestamps = st.none() | st.integers(-2**63, 2**63 - 1) | st.sampled_from(
    [253_402_300_799_999, 253_402_300_800_000])  # the last ms of 9999, the first of 10000


@FUZZ
@given(st.lists(st.tuples(values, headers, timestamps), max_size=5))
def test_a_batch_of_arbitrary_records_never_raises(
        records: list[tuple[bytes, list[tuple[str, bytes]], int | None]]) -> None:
    raw = [RawRecord("t", 0, i, None, value, tuple(hs), ts)
           for i, (value, hs, ts) in enumerate(records)]
    outcome = apply_batch(_Store(), raw, IngestOptions(max_event_bytes=MAX_BYTES))  # type: ignore[arg-type]
    assert outcome.markers + outcome.duplicates + len(outcome.dead) == len(raw)
    for letter in outcome.dead:
        assert RECORD_REJECTIONS[type(letter.error)] == letter.error.code


def test_the_replay_marker_is_read_as_one_and_its_forgery_is_not() -> None:
    outcome = apply_batch(_Store(), [  # type: ignore[arg-type]
        RawRecord("t", 0, 0, None, MARKER, tuple(MARKER_HEADERS)),
        RawRecord("t", 0, 1, None, MARKER.replace(b'"partition":0', b'"partition":1'),
                  tuple(MARKER_HEADERS))], IngestOptions())
    assert outcome.markers == 1
    assert [d.error.code for d in outcome.dead] == ["forged_replay_marker"]
