"""Replay markers and the caught-up decision (pure logic)."""

from __future__ import annotations

import json

from hypothesis import given, strategies as st

from pipeline.kafka.markers import H_MARKER, catch_up, is_marker, marker_generation, marker_record


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
    assert is_marker(value)


def test_ordinary_events_are_not_markers() -> None:
    put = json.dumps({"specversion": "1.0", "type": "brainstream.object.put",
                      "data": {"title": "brainstream.replay.marker"}}).encode()
    assert marker_generation(put) is None
    assert not is_marker(b"not json brainstream.replay.marker")
    assert not is_marker(b"")
    assert not is_marker(None)
    bogus = json.dumps({"type": "brainstream.replay.marker", "data": {"generation": True}})
    assert marker_generation(bogus.encode()) is None
    assert marker_generation(b"{}", [(H_MARKER, b"x")]) is None


@given(st.integers(min_value=1, max_value=10_000), st.integers(min_value=0, max_value=255))
def test_marker_round_trip(generation: int, partition: int) -> None:
    _, value, headers = marker_record(generation, partition)
    assert marker_generation(value, headers) == generation
    assert marker_generation(value) == generation


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
