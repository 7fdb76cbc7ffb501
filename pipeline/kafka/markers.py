"""Replay markers and the caught-up decision (pure logic, no I/O).

`brainstream replay` publishes one marker record to every partition of the input topic when it
starts. A replay has caught up once it consumed past its own marker on every partition: the
embedded broker's end offsets are wrong for multi-record batches, so "caught up" is never decided
from end offsets. The live consumer skips markers (acknowledged and counted, never dead-lettered).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

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


def marker_generation(value: bytes | None,
                      headers: Iterable[tuple[str, bytes | None]] = ()) -> int | None:
    """The generation a record is the replay marker of, or None for any other record."""
    for key, raw in headers:
        if key == H_MARKER and raw:
            try:
                return int(raw.decode())
            except ValueError:
                return None
    # a marker whose headers were lost (a copy made by a tool that drops headers)
    if not value or _TYPE_BYTES not in value:
        return None
    try:
        obj = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(obj, dict) or obj.get("type") != MARKER_TYPE:
        return None
    data = obj.get("data")
    gen = data.get("generation") if isinstance(data, dict) else None
    return gen if isinstance(gen, int) and not isinstance(gen, bool) else None


def is_marker(value: bytes | None, headers: Iterable[tuple[str, bytes | None]] = ()) -> bool:
    """Whether the record is a replay marker (of any generation)."""
    return marker_generation(value, headers) is not None


@dataclass(frozen=True)
class CatchUp:
    """Where a replay stands, and whether it may switch."""

    ready: bool
    reason: str


def catch_up(partitions: Sequence[int], markers_seen: Mapping[int, int],
             positions: Mapping[int, int], live_committed: Mapping[int, int], *,
             embed_pending: int, outbox_pending: int) -> CatchUp:
    """The replay may switch once (1) it consumed its own marker on every partition, (2) it is
    at or past the live consumer group's committed offset on every partition (so no event the
    live generation acknowledged is missing), and (3) nothing it applied is still waiting for an
    embedding or the graph."""
    missing = [p for p in partitions if p not in markers_seen]
    if missing:
        return CatchUp(False, f"marker not reached on partition(s) {missing}")
    behind = [p for p in partitions if positions.get(p, 0) < live_committed.get(p, 0)]
    if behind:
        return CatchUp(False, f"behind the live consumer on partition(s) {behind}")
    if embed_pending:
        return CatchUp(False, f"{embed_pending} row(s) waiting for an embedding")
    if outbox_pending:
        return CatchUp(False, f"{outbox_pending} outbox row(s) waiting for the graph")
    return CatchUp(True, "caught up")
