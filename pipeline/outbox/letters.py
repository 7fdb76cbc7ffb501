"""Dead letters of the outbox: what the relay sends when the graph keeps refusing a row, and how
`brainstream dlq retry` finds the row again.

The letter has the dead-letter topic's format (`pipeline.kafka.io.dead_letter_headers`, code
`graph_sync_failed`, source topic `outbox`); its value names the row and what it asked for.
"""

from __future__ import annotations

import json
import uuid

from pipeline.domain.errors import BrainstreamError
from pipeline.kafka.io import dead_letter_headers
from pipeline.outbox.store import OutboxRow
from pipeline.ports import Letter

# The `brainstream.source.topic` header of an outbox letter (it came from no Kafka topic).
LETTER_SOURCE = "outbox"


def outbox_letter(row: OutboxRow, error: BrainstreamError) -> Letter:
    """The dead letter of a failed row, keyed by its aggregate like the events about it."""
    value = json.dumps({"outbox_id": row.id, "namespace": str(row.namespace_id),
                        "aggregate_id": str(row.aggregate_id), "op": row.op,
                        "payload": row.payload}, sort_keys=True).encode()
    headers = dead_letter_headers(error, topic=LETTER_SOURCE, partition=-1, offset=-1,
                                  event_id=None)
    return str(row.aggregate_id).encode(), value, headers


def letter_row(value: bytes) -> tuple[int, uuid.UUID]:
    """(outbox row id, aggregate id) named by an outbox letter's value."""
    body = json.loads(value)
    return int(body["outbox_id"]), uuid.UUID(body["aggregate_id"])
