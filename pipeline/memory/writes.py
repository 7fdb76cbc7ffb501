"""The write-through path of conversation memory (`POST /v1/sessions/{id}/messages`): the API
publishes a `brainstream.messages.add` event like any publisher (keyed by session, signed with
the API's publisher key if it has one) and, when asked, waits a bounded time until the consumer
has stored the messages, for callers that need to read their own writes.

The event is the only way in: a message written here is replayed, dead-lettered and counted
exactly like one from any other publisher.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline.domain.memory_model import Message, session_key
from pipeline.kafka.event_writes import event_time, poll_until
from pipeline.kafka.publish_pool import PublishPool
from pipeline.kafka.publisher import EventPublisher, LazyPublisher
from schemas.memory import MESSAGES_ADD

# What the wait polls: the messages of these uuids the session holds now.
StoredMessages = Callable[[uuid.UUID, Sequence[uuid.UUID]], Awaitable[list[Message]]]


@dataclass
class WriteResult:
    """The published event's id; whether every message was stored before the answer (and
    then the stored messages, by seq)."""

    event_id: str
    applied: bool
    messages: list[Message] = field(default_factory=list)


class MessageWriter:
    """Publishes messages.add events for the API; the producer is made on first use (the API
    starts and serves reads while the broker is down)."""

    def __init__(self, make_publisher: Callable[[], EventPublisher], *, wait_seconds: float,
                 threads: PublishPool, poll_seconds: float = 0.05) -> None:
        self._publisher = LazyPublisher(make_publisher, timeout=wait_seconds + 10.0)
        self._threads = threads
        self.wait_seconds = wait_seconds
        self.poll_seconds = poll_seconds

    async def add(self, ns: uuid.UUID, session_id: str, messages: Sequence[dict[str, Any]], *,
                  source: str, wait: bool, stored: StoredMessages) -> WriteResult:
        """Publish the messages as an event of `source` (the caller's key: `api:<name>`; ids
        are fresh per request, so the ledger's (source, id) stays unique) (raises
        `InvalidInput` for an event the schemas refuse,
        `Unavailable` when the broker does not acknowledge it); with `wait`, poll `stored`
        until every message is there or the wait runs out."""
        event_id = str(uuid.uuid4())
        envelope = {
            "specversion": "1.0", "id": event_id, "source": source,
            "type": MESSAGES_ADD,
            "time": event_time(),
            "datacontenttype": "application/json", "namespace": str(ns),
            "data": {"session_id": session_id, "messages": list(messages)},
        }
        await self._threads.run(self._publisher.publish, envelope)
        result = WriteResult(event_id, applied=False)
        if not wait:
            return result
        key = session_key(ns, session_id)
        uuids = [uuid.UUID(str(m["uuid"])) for m in messages]

        async def all_stored() -> list[Message] | None:
            found = await stored(key, uuids)
            return found if len(found) == len(uuids) else None

        found = await poll_until(all_stored, seconds=self.wait_seconds,
                                 interval=self.poll_seconds)
        if found is None:
            return result
        return WriteResult(result.event_id, applied=True, messages=found)

    def close(self) -> None:
        """Close the producer, if one was made."""
        self._publisher.close()
