"""The outbox's op vocabulary: what a row asks the relay to do, and the payload of an edge row.

A row names an aggregate to re-sync, not a delta: `NODE_SYNC` re-syncs an object (its node, and
the incident edges a revived node gets back), `EDGE_SYNC` one link, named by its payload.
The entity layer adds two: `ENTITY_SYNC` re-syncs one extracted entity (aggregate = entity id:
its `NamedEntity` node and its entity-to-entity edges, or their removal once it is merged away or
no live row mentions it), `MENTIONS_SYNC` the `MENTIONS` edges of one object (aggregate = the
root object id: from its node to the entities its live rows mention).
"""

from __future__ import annotations

import uuid
from typing import Any

NODE_SYNC = "node_sync"
EDGE_SYNC = "edge_sync"
ENTITY_SYNC = "entity_sync"
MENTIONS_SYNC = "mentions_sync"

# (from_id, relation_type, to_id): a link's identity
LinkKey = tuple[uuid.UUID, str, uuid.UUID]


def edge_payload(from_id: uuid.UUID | str, relation_type: str,
                 to_id: uuid.UUID | str) -> dict[str, Any]:
    """The payload of an `EDGE_SYNC` row: which link to re-sync."""
    return {"from": str(from_id), "relation_type": relation_type, "to": str(to_id)}


def edge_key(payload: dict[str, Any]) -> LinkKey:
    """The link an `EDGE_SYNC` row's payload names."""
    return uuid.UUID(payload["from"]), payload["relation_type"], uuid.UUID(payload["to"])
