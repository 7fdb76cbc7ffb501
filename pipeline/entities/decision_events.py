"""The event of a curator's decision (`brainstream.entity.decision`), as the API publishes it
(through `pipeline.kafka.publisher.LazyPublisher`, signed with the API's publisher key when it
has one): the decision's record on the input topic, which a replay reads again
(`pipeline/entities/decisions.py` applies it)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from schemas.entities import ENTITY_DECISION


def decision_envelope(namespace: uuid.UUID, event_id: str, decision: str, from_id: uuid.UUID,
                      to_id: uuid.UUID, decided_by: str, note: str | None, *,
                      source: str) -> dict[str, Any]:
    """The event of one decision, of `source` (the curator's key: `api:<name>`)."""
    data: dict[str, Any] = {"decision": decision, "from": str(from_id), "to": str(to_id),
                            "decided_by": decided_by}
    if note is not None:
        data["note"] = note
    return {"specversion": "1.0", "id": event_id, "source": source, "type": ENTITY_DECISION,
            "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "datacontenttype": "application/json", "namespace": str(namespace), "data": data}
