"""The row id of a conversation-memory session, derived from what its events carry, and the
metadata key only the pipeline and privileged publishers write.

In `domain/` because the event schemas (`schemas/events.py`: the record key) and the memory
wing both need it, and the memory wing imports the schemas.
"""

from __future__ import annotations

import json
import uuid
from typing import Final

# The top-level metadata key of a message that only the pipeline's extractors and privileged
# publishers write (the event schemas check that it holds an object).
SYSTEM_KEY: Final = "system"


def session_key(namespace: uuid.UUID, session_id: str) -> uuid.UUID:
    """The row id of a session: derived from the namespace and the publisher's session id, so a
    replay rebuilds the same id, and two tenants' sessions of the same name never meet. It is
    also the Kafka record key of the session's events (one partition, in order)."""
    return uuid.uuid5(namespace, json.dumps(["brainstream.session", session_id]))
