"""Replay markers and the caught-up decision (pure logic, no I/O).

`brainstream replay` publishes one marker record to every partition of the input topic when it
starts. A replay has caught up once it consumed past its own marker on every partition: the
embedded broker's end offsets are wrong for multi-record batches, so "caught up" is never decided
from end offsets. The live consumer skips markers (acknowledged and counted, never dead-lettered);
a record that only claims to be one is dead-lettered (`read_marker`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeGuard

from pipeline.domain.errors import ForgedReplayMarker

MARKER_TYPE = "brainstream.replay.marker"
H_MARKER = "brainstream.replay.marker"  # header: the generation id, as text
_TYPE_BYTES = MARKER_TYPE.encode()


def marker_record(generation: int, partition: int, *, now: datetime | None = None
                  ) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """(key, value, headers) of the marker for one partition: a CloudEvent of type
    `brainstream.replay.marker` whose data names the generation, and a header saying the same
    (so readers recognize it without parsing the value)."""
    at = (now or datetime.now(UTC)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    envelope = {
        "specversion": "1.0",
        "id": f"replay-marker-g{generation}-p{partition}",
        "source": "brainstream-replay",
        "type": MARKER_TYPE,
        "time": at,
        "datacontenttype": "application/json",
        "data": {"generation": generation, "partition": partition},
    }
    value = json.dumps(envelope, separators=(",", ":"), sort_keys=True).encode()
    return f"replay-marker-g{generation}".encode(), value, [(H_MARKER, str(generation).encode())]


def read_marker(value: bytes | None,
                headers: Iterable[tuple[str, bytes | None]] = ()) -> int | None:
    """The generation of a replay marker; None for a record that does not claim to be one.

    A record claims to be a marker by the marker header or by the marker type in its value (a
    copy whose headers a tool dropped). It is one only when its value is byte for byte what
    `marker_record` writes for the generation and partition it names, and the header, if any,
    names the same generation: markers are skipped unseen, so nothing else may pass for one.
    Raises `ForgedReplayMarker` for a claim that is not in that format.
    """
    claims = [raw for key, raw in headers if key == H_MARKER]
    obj = _json_object(value) if value and _TYPE_BYTES in value else None
    if not claims and (obj is None or obj.get("type") != MARKER_TYPE):
        return None
    generation = _genuine(value or b"", obj)
    if generation is None:
        raise ForgedReplayMarker("the record claims to be a replay marker (its header or type)"
                                 " but is not one in the replay's own format", field=H_MARKER)
    if any(raw != str(generation).encode() for raw in claims) or len(claims) > 1:
        raise ForgedReplayMarker("the replay-marker header does not name the marker's "
                                 "generation", field=H_MARKER)
    return generation


def _json_object(value: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(value)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    return obj if isinstance(obj, dict) else None


def _genuine(value: bytes, obj: dict[str, Any] | None) -> int | None:
    """The generation when `value` is exactly a marker `marker_record` writes, else None."""
    if obj is None or not isinstance(data := obj.get("data"), dict):
        return None
    generation, partition, at = data.get("generation"), data.get("partition"), obj.get("time")
    if not (_count(generation) and _count(partition) and isinstance(at, str)):
        return None
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    _, canonical, _ = marker_record(generation, partition, now=when)
    return generation if canonical == value else None


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def marker_generation(value: bytes | None,
                      headers: Iterable[tuple[str, bytes | None]] = ()) -> int | None:
    """The generation a record is the genuine replay marker of, or None for any other record
    (a forged one included)."""
    try:
        return read_marker(value, headers)
    except ForgedReplayMarker:
        return None


@dataclass(frozen=True)
class CatchUp:
    """Where a replay stands, and whether it may switch."""

    ready: bool
    reason: str


def catch_up(partitions: Sequence[int], markers_seen: Mapping[int, int],
             positions: Mapping[int, int], live_committed: Mapping[int, int], *,
             embed_pending: int, outbox_pending: int, extract_pending: int = 0,
             memory_pending: int = 0) -> CatchUp:
    """The replay may switch once (1) it consumed its own marker on every partition, (2) it is
    at or past the live consumer group's committed offset on every partition (so no event the
    live generation acknowledged is missing), and (3) nothing it applied is still waiting for an
    embedding, an entity extraction, a message extractor or summary, or the graph."""
    missing = [p for p in partitions if p not in markers_seen]
    if missing:
        return CatchUp(False, f"marker not reached on partition(s) {missing}")
    behind = [p for p in partitions if positions.get(p, 0) < live_committed.get(p, 0)]
    if behind:
        return CatchUp(False, f"behind the live consumer on partition(s) {behind}")
    if embed_pending:
        return CatchUp(False, f"{embed_pending} row(s) waiting for an embedding")
    if extract_pending:
        return CatchUp(False, f"{extract_pending} row(s) waiting for entity extraction")
    if memory_pending:
        return CatchUp(False, f"{memory_pending} message extractor row(s) or summaries waiting")
    if outbox_pending:
        return CatchUp(False, f"{outbox_pending} outbox row(s) waiting for the graph")
    return CatchUp(True, "caught up")
