"""The row id of a conversation-memory session (issue 12), derived from what its events carry.

In `domain/` because the event schemas (`schemas/events.py`: the record key) and the memory
wing both need it, and the memory wing imports the schemas.
"""

from __future__ import annotations

import json
import uuid


def session_key(namespace: uuid.UUID, session_id: str) -> uuid.UUID:
    """The row id of a session: derived from the namespace and the publisher's session id, so a
    replay rebuilds the same id, and two tenants' sessions of the same name never meet. It is
    also the Kafka record key of the session's events (one partition, in order)."""
    return uuid.uuid5(namespace, json.dumps(["brainstream.session", session_id]))
