"""`EventPublisher` checks an event against the consumer's limit it is given (MAX_EVENT_BYTES),
not a fixed 1,000,000 bytes: the API publishes what its consumer accepts, and refuses more."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from pipeline.domain.errors import PayloadTooLarge
from pipeline.kafka.publisher import EventPublisher


class _Producer:
    """Takes what is sent (the broker is not what this checks)."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, topic: str, *, key: bytes | None, value: bytes, headers: Any) -> object:
        self.sent.append(value)
        return object()


def _envelope(content_bytes: int) -> dict[str, Any]:
    return {"specversion": "1.0", "id": "e-1", "source": "api:t", "namespace": str(uuid.uuid4()),
            "type": "brainstream.object.put",
            "data": {"kind": "note", "title": "big", "content": "x" * content_bytes}}


def test_the_publisher_takes_the_limit_it_is_given() -> None:
    producer = _Producer()
    roomy = EventPublisher(producer, "events", max_event_bytes=3_000_000)  # type: ignore[arg-type]
    roomy.send_event(_envelope(1_500_000))
    assert len(producer.sent) == 1
    tight = EventPublisher(producer, "events", max_event_bytes=100_000)  # type: ignore[arg-type]
    with pytest.raises(PayloadTooLarge):
        tight.send_event(_envelope(200_000))
    assert len(producer.sent) == 1
