"""The outbox's op vocabulary: what a row asks the relay to do, and the payload of an edge row.

A row names an aggregate to re-sync, not a delta: `NODE_SYNC` re-syncs an object (its node, and
the incident edges a revived node gets back), `EDGE_SYNC` one link, named by its payload.
The entity layer adds two: `ENTITY_SYNC` re-syncs one extracted entity (aggregate = entity id:
its `NamedEntity` node and its entity-to-entity edges, or their removal once it is merged away or
no live row mentions it), `MENTIONS_SYNC` the `MENTIONS` edges of one object (aggregate = the
root object id: from its node to the entities its live rows mention).

An `ENTITY_SYNC` row of the extraction write-back may narrow the edge re-sync: its payload lists
the entities whose edges with this one the batch changed (`entity_sync_payload`), and the relay
then re-syncs the edges of those pairs only, not every edge of the entity. A hub entity ("cells")
that most batches name has thousands of edges; re-reading them all for each batch made the
relay's work grow with the square of the corpus. A row without the list (merges, holds, repairs,
relations) re-syncs every edge, as does a node new to the graph.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

NODE_SYNC = "node_sync"
EDGE_SYNC = "edge_sync"
ENTITY_SYNC = "entity_sync"
MENTIONS_SYNC = "mentions_sync"
# The relay's object lane (objects and links); every other op is the entity lane's. Migration
# 0040's partial indexes `outbox_due_objects` / `outbox_due_others` name the same ops: a claim
# whose list differs from theirs still answers, but walks no index
# (tests/writeside/test_outbox_lanes.py compares the two).
OBJECT_LANE_OPS = (NODE_SYNC, EDGE_SYNC)

# An entity_sync payload lists at most this many partners; a longer list re-syncs every edge.
MAX_EDGE_PARTNERS = 2048

# (from_id, relation_type, to_id): a link's identity
LinkKey = tuple[uuid.UUID, str, uuid.UUID]


def edge_payload(from_id: uuid.UUID | str, relation_type: str,
                 to_id: uuid.UUID | str) -> dict[str, Any]:
    """The payload of an `EDGE_SYNC` row: which link to re-sync."""
    return {"from": str(from_id), "relation_type": relation_type, "to": str(to_id)}


def edge_key(payload: dict[str, Any]) -> LinkKey:
    """The link an `EDGE_SYNC` row's payload names."""
    return uuid.UUID(payload["from"]), payload["relation_type"], uuid.UUID(payload["to"])


def entity_sync_payload(partners: Iterable[uuid.UUID]) -> dict[str, Any] | None:
    """The payload of an `ENTITY_SYNC` row whose entity's edges changed with `partners` only
    (none: its node only); None (every edge) past `MAX_EDGE_PARTNERS`."""
    ids = sorted({str(p) for p in partners})
    return None if len(ids) > MAX_EDGE_PARTNERS else {"edges": ids}


def entity_sync_partners(payload: dict[str, Any] | None) -> set[uuid.UUID] | None:
    """The partners an `ENTITY_SYNC` row's payload narrows its edge re-sync to; None when it
    re-syncs every edge of its entity."""
    if not payload or "edges" not in payload:
        return None
    return {uuid.UUID(p) for p in payload["edges"]}
