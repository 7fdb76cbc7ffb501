"""A link's id: one UUID naming (from, relation type, to), so a link can be addressed by a URL
path segment (`GET /v1/links/{link_id}/history`) and named alike by every part of the system."""

from __future__ import annotations

import uuid

_LINK_NAMESPACE = uuid.UUID("5b0c7e3e-1f5d-4b8e-9a34-2d6c1e0f7a91")


def link_id(from_id: uuid.UUID, relation_type: str, to_id: uuid.UUID) -> uuid.UUID:
    """The link's id (a name-based UUID: the same link has it everywhere, in every generation)."""
    return uuid.uuid5(_LINK_NAMESPACE, f"{from_id}|{relation_type}|{to_id}")


def event_ref(source: str, event_id: str) -> str:
    """How a link version names the event that wrote or invalidated it: `source#id`."""
    return f"{source}#{event_id}"
