"""The outbox's op vocabulary: what a row asks the relay to do, and the payload of an edge row.

A row names an aggregate to re-sync, not a delta: `NODE_SYNC` re-syncs an object (its node, and
the incident edges a revived node gets back), `EDGE_SYNC` one link, named by its payload.

`RETIRED_OPS` are ops older versions wrote (the graph's entity projection, no longer kept:
docs/architecture.md, "The graph holds objects and links"): a row of one, enqueued by a worker
of an older version during an upgrade, is marked done without being applied.
"""

from __future__ import annotations

import uuid
from typing import Any

NODE_SYNC = "node_sync"
EDGE_SYNC = "edge_sync"
# Migration 0043 marks the pending rows of these done; the relay does the same to any it claims.
RETIRED_OPS = ("entity_sync", "mentions_sync")

# (from_id, relation_type, to_id): a link's identity
LinkKey = tuple[uuid.UUID, str, uuid.UUID]


def edge_payload(from_id: uuid.UUID | str, relation_type: str,
                 to_id: uuid.UUID | str) -> dict[str, Any]:
    """The payload of an `EDGE_SYNC` row: which link to re-sync."""
    return {"from": str(from_id), "relation_type": relation_type, "to": str(to_id)}


def edge_key(payload: dict[str, Any]) -> LinkKey:
    """The link an `EDGE_SYNC` row's payload names."""
    return uuid.UUID(payload["from"]), payload["relation_type"], uuid.UUID(payload["to"])
