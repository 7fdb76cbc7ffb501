"""Publishing a curator's decision (`brainstream.entity.decision`) from the API: the event is
the decision's record on the input topic, which a replay reads again
(`pipeline/entities/decisions.py` applies it). Like any publisher the API signs it with its
publisher key when it has one; the producer is made on first use, so the API starts and serves
reads while the broker is down (a decision then answers 503 and changes nothing)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pipeline.domain.errors import Unavailable
from pipeline.kafka.publisher import EventPublisher
from schemas.entities import ENTITY_DECISION

# The CloudEvents `source` of the API's events; ids are fresh per decision.
API_SOURCE = "brainstream.api"


def decision_envelope(namespace: uuid.UUID, event_id: str, decision: str, from_id: uuid.UUID,
                      to_id: uuid.UUID, decided_by: str, note: str | None) -> dict[str, Any]:
    """The event of one decision."""
    data: dict[str, Any] = {"decision": decision, "from": str(from_id), "to": str(to_id),
                            "decided_by": decided_by}
    if note is not None:
        data["note"] = note
    return {"specversion": "1.0", "id": event_id, "source": API_SOURCE, "type": ENTITY_DECISION,
            "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "datacontenttype": "application/json", "namespace": str(namespace), "data": data}


class DecisionPublisher:
    """Sends decision events and waits for the broker's acknowledgement."""

    def __init__(self, make_publisher: Callable[[], EventPublisher], *,
                 timeout: float) -> None:
        self._make = make_publisher
        self._publisher: EventPublisher | None = None
        self._lock = threading.Lock()  # one send-and-flush at a time on the shared producer
        self.timeout = timeout

    def publish(self, envelope: dict[str, Any]) -> None:
        """Send one event and wait until the broker has it (`Unavailable` when it does not
        answer within the timeout; `InvalidInput` for an event the schemas refuse)."""
        with self._lock:
            if self._publisher is None:
                try:
                    self._publisher = self._make()
                except Exception as exc:  # no broker to bootstrap from (NoBrokersAvailable)
                    raise Unavailable(f"cannot connect a producer: {exc}") from exc
            self._publisher.send_event(envelope)
            self._publisher.flush(timeout=self.timeout)

    def close(self) -> None:
        """Close the producer, if one was made."""
        with self._lock:
            if self._publisher is not None:
                self._publisher.producer.close()
                self._publisher = None
