"""Replay markers and the caught-up decision (pure logic)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, strategies as st

from pipeline.domain.errors import ForgedReplayMarker
from pipeline.kafka.markers import (
    H_MARKER,
    catch_up,
    marker_generation,
    marker_record,
    read_marker,
)


def test_marker_record_names_its_generation_in_header_and_body() -> None:
    key, value, headers = marker_record(7, 2)
    assert key == b"replay-marker-g7"
    assert headers == [(H_MARKER, b"7")]
    body = json.loads(value)
    assert body["type"] == "brainstream.replay.marker"
    assert body["data"] == {"generation": 7, "partition": 2}
    assert marker_generation(value, headers) == 7


def test_marker_is_recognized_without_its_header() -> None:
    _, value, _ = marker_record(3, 0)
    assert marker_generation(value, []) == 3
    assert read_marker(value) == 3


def test_ordinary_events_are_not_markers() -> None:
    put = json.dumps({"specversion": "1.0", "type": "brainstream.object.put",
                      "data": {"title": "brainstream.replay.marker"}}).encode()
    assert marker_generation(put) is None
    assert read_marker(put) is None
    assert read_marker(b"not json brainstream.replay.marker") is None
    assert read_marker(b"") is None
    assert read_marker(None) is None
    bogus = json.dumps({"type": "brainstream.replay.marker", "data": {"generation": True}})
    assert marker_generation(bogus.encode()) is None
    assert marker_generation(b"{}", [(H_MARKER, b"x")]) is None


@given(st.integers(min_value=1, max_value=10_000), st.integers(min_value=0, max_value=255),
       st.datetimes(timezones=st.just(UTC)))
def test_marker_round_trip(generation: int, partition: int, at: datetime) -> None:
    _, value, headers = marker_record(generation, partition, now=at)
    assert read_marker(value, headers) == generation
    assert read_marker(value) == generation


def _forgeries() -> list[tuple[bytes, list[tuple[str, bytes]]]]:
    _, value, headers = marker_record(4, 1)
    body = json.loads(value)
    put = json.dumps({"specversion": "1.0", "id": "e1", "source": "s", "namespace":
                      "8f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b", "type": "brainstream.object.put",
                      "data": {"kind": "company", "title": "hidden"}}).encode()
    return [
        (put, [(H_MARKER, b"4")]),  # a real event hiding behind the header
        (value, [(H_MARKER, b"5")]),  # the header names another generation
        (value, [(H_MARKER, b"04")]),
        (value, [(H_MARKER, b"4"), (H_MARKER, b"4")]),
        (value + b" ", headers),  # not byte for byte the replay's own
        (json.dumps(body).encode(), headers),  # re-serialized
        (json.dumps({**body, "data": {**body["data"], "title": "x"}}, separators=(",", ":"),
                    sort_keys=True).encode(), []),  # an extra field, typed as a marker
        (json.dumps({**body, "id": "other"}, separators=(",", ":"), sort_keys=True).encode(),
         headers),
        (value.replace(b'"generation":4', b'"generation":true'), []),
        (b"", [(H_MARKER, b"4")]),
    ]


@pytest.mark.parametrize(("value", "headers"), _forgeries())
def test_a_record_that_only_claims_to_be_a_marker_is_forged(
        value: bytes, headers: list[tuple[str, bytes]]) -> None:
    with pytest.raises(ForgedReplayMarker) as raised:
        read_marker(value, headers)
    assert raised.value.code == "forged_replay_marker"
    assert marker_generation(value, headers) is None


def _ready(**kwargs: object) -> tuple[bool, str]:
    args: dict[str, object] = {"partitions": [0, 1], "markers_seen": {0: 5, 1: 3},
                               "positions": {0: 10, 1: 4}, "live_committed": {0: 9, 1: 4},
                               "embed_pending": 0, "outbox_pending": 0}
    args.update(kwargs)
    state = catch_up(args.pop("partitions"), args.pop("markers_seen"),  # type: ignore[arg-type]
                     args.pop("positions"), args.pop("live_committed"),  # type: ignore[arg-type]
                     **args)  # type: ignore[arg-type]
    return state.ready, state.reason


def test_caught_up_needs_every_marker() -> None:
    assert _ready() == (True, "caught up")
    ready, reason = _ready(markers_seen={0: 5})
    assert not ready and "[1]" in reason


def test_caught_up_needs_the_live_groups_committed_offsets() -> None:
    ready, reason = _ready(live_committed={0: 11, 1: 4})
    assert not ready and "live consumer" in reason
    # a partition the live group never committed counts as offset 0
    assert _ready(live_committed={})[0]


def test_caught_up_needs_empty_backlogs() -> None:
    assert not _ready(embed_pending=1)[0]
    assert not _ready(outbox_pending=3)[0]
