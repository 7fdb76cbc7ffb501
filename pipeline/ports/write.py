"""The write path's ports: the event store the ingest writes through, the trigger of the
workers' tasks, the dead-letter sink."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from pipeline.domain.kinds import KindCatalog
from pipeline.domain.memory_model import NewMessage, SessionHead
from pipeline.domain.structure import RowStructure
from pipeline.domain.validity import Version
from pipeline.domain.write_model import DeferredRow, LinkHead, ObjectHead, ObjectWrite, Selection

# A dead letter as the sink takes it: the record's key and value, and the headers naming why.
Letter = tuple[bytes | None, bytes, list[tuple[str, bytes]]]


class EventStore(Protocol):
    """The write path's view of the source of truth, bound to one transaction.

    Every method runs inside the caller's transaction; nothing commits. Errors: an unreachable
    store raises `Unavailable` (the batch is retried); a value the store refuses raises
    `RejectedByDatabase` (that event is dead-lettered).
    """

    def savepoint(self) -> AbstractContextManager[None]:
        """Undo one event's writes on error without losing the rest of the batch."""
        ...

    def claim_event(self, namespace: uuid.UUID, source: str, event_id: str,
                    event_type: str) -> bool:
        """Record the event as processed; False when it already was (a duplicate)."""
        ...

    def claim_events(self, events: Sequence[tuple[uuid.UUID, str, str, str]]
                     ) -> set[tuple[uuid.UUID, str, str]]:
        """Record events (namespace, source, event id, type; no two alike) as processed; the
        (namespace, source, event id) of those that were not already (the rest: duplicates)."""
        ...

    def processed(self, events: Sequence[tuple[uuid.UUID, str, str]]
                  ) -> set[tuple[uuid.UUID, str, str]]:
        """Which of the events (namespace, source, event id) the ledger holds."""
        ...

    def set_outcome(self, namespace: uuid.UUID, source: str, event_id: str,
                    outcome: str) -> None: ...

    def record_entity_decision(self, namespace: uuid.UUID, source: str, event_id: str,
                               decision: str, from_id: uuid.UUID, to_id: uuid.UUID,
                               decided_by: str, note: str | None) -> None:
        """Record a curator's decision on two entities as pending (once per event)."""
        ...

    def load_catalog(self) -> KindCatalog: ...

    def set_event_time(self, at: datetime | None) -> None:
        """Stamp the following writes with `at` (None: the transaction's own time)."""
        ...

    def lock_object(self, object_id: uuid.UUID) -> ObjectHead | None:
        """The row of `object_id`, locked until commit (events on one object serialize)."""
        ...

    def lock_objects(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, ObjectHead]:
        """The rows of `ids` that exist, locked until commit."""
        ...

    def share_objects(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, ObjectHead]:
        """Rows of `ids`, share-locked so they cannot vanish."""
        ...

    def upsert_objects(self, rows: Sequence[ObjectWrite]) -> list[uuid.UUID]:
        """Insert or replace `rows`; the ids refused because another namespace owns them."""
        ...

    def chunked_parts_of(self, parent_id: uuid.UUID) -> list[tuple[uuid.UUID, int]]: ...

    def explicit_parts_of(self, parent_id: uuid.UUID) -> list[tuple[uuid.UUID, str | None]]:
        """(id, content) of the parts sent with this `parent_id` (not cut by the pipeline)."""
        ...

    def retitle_parts(self, parent_id: uuid.UUID, title: str | None,
                      hashes: Sequence[tuple[uuid.UUID, str]]) -> None:
        """Give parts their parent's new title and the hash of their new index text, (id,
        hash) each; a part whose hash changed is embedded again."""
        ...

    def delete_rows(self, ids: Sequence[uuid.UUID]) -> None: ...

    def set_caller_vector(self, ids: Sequence[uuid.UUID], vector: Sequence[float] | None,
                          model: str) -> None:
        """Give rows a caller's vector (stored under `model`, embedded: the stage leaves them
        alone); None: rows that hold a caller's vector go back to the model (pending)."""
        ...

    def keep_caller_vectors(self, root: uuid.UUID) -> None:
        """Rows of `root` holding a caller's vector stay embedded after their index text
        changed under them (a parent's new title)."""
        ...

    def soft_delete_object(self, object_id: uuid.UUID, version: int | None,
                           event_id: str) -> None: ...

    def write_structure(self, namespace: uuid.UUID, root_id: uuid.UUID, put_id: uuid.UUID,
                        row_ids: Sequence[uuid.UUID], rows: Sequence[RowStructure] | None,
                        event_id: str) -> None:
        """Replace the supplied structure of the rows a put writes (None: it supplies none) and
        record the facts it states, invalidating those it no longer states. Before the rows'
        upsert."""
        ...

    def invalidate_facts(self, object_id: uuid.UUID, event_id: str) -> None:
        """The facts a deleted object (or its parts) stated are no longer believed."""
        ...

    def soft_delete_matching(self, namespace: uuid.UUID, selection: Selection, *, limit: int,
                             event_id: str) -> list[uuid.UUID]:
        """Hide the first `limit` (in id order) live first-class objects of `namespace` the
        selection matches, with their parts; their ids."""
        ...

    def revive_parts(self, parent_id: uuid.UUID, deleted_at: datetime) -> None: ...

    def lock_link(self, from_id: uuid.UUID, relation_type: str,
                  to_id: uuid.UUID) -> LinkHead | None: ...

    def link_group(self, from_id: uuid.UUID, relation_type: str, to_id: uuid.UUID | None
                   ) -> tuple[list[tuple[tuple[uuid.UUID, int], Version]], dict[uuid.UUID, int]]:
        """The believed versions of a link group keyed by (to_id, seq), and each link's last
        seq; `to_id` None: every target of the source (a functional group). The group's
        links rows are locked until commit."""
        ...

    def write_link_versions(self, namespace: uuid.UUID, from_id: uuid.UUID, relation_type: str,
                            invalidate: Sequence[tuple[uuid.UUID, int]],
                            insert: Sequence[tuple[Version, str]], last: dict[uuid.UUID, int],
                            *, at: datetime, event_ref: str) -> None:
        """Invalidate believed versions and insert new ones (with their change) at `at`."""
        ...

    def set_link_state(self, namespace: uuid.UUID, from_id: uuid.UUID, relation_type: str,
                       to_id: uuid.UUID, meta: dict[str, Any] | None, *, at: datetime,
                       event_id: str, version: int | None, fallback_meta: dict[str, Any]
                       ) -> None:
        """The link's current-state row: live with `meta`, or soft-deleted (None)."""
        ...

    def event_time(self) -> datetime:
        """The time the current event's writes are stamped with."""
        ...

    def record_object_versions(self, versions: Sequence[tuple[uuid.UUID, str, str,
                                                              int | None]]) -> None:
        """Append a version (object id, change, event id, event version) of each object."""
        ...

    def is_waiting(self, wait_key: str, *, before: int | None = None) -> bool: ...

    def defer(self, *, namespace: uuid.UUID, source: str, event_id: str, wait_key: str,
              topic: str, partition: int, offset: int, key: bytes | None, value: bytes,
              headers: Sequence[tuple[str, bytes]], code: str, reason: str,
              field: str | None, record_time: datetime | None = None) -> None: ...

    def due_deferred(self, limit: int) -> list[DeferredRow]: ...

    def drop_deferred(self, row_id: int) -> None: ...

    def postpone_deferred(self, row_id: int, delay: float) -> None: ...

    def enqueue(self, namespace: uuid.UUID, aggregate_id: uuid.UUID, op: str,
                payload: dict[str, Any] | None = None) -> None:
        """Record what the graph must do, in this transaction (the transactional outbox); the
        store may hold the row until `flush`, dropping it if the event's savepoint rolls back."""
        ...

    def flush(self) -> None:
        """Write what the store holds back for the events applied so far (their outbox rows),
        in this transaction; called once the batch is applied, before the commit."""
        ...

    @property
    def memory(self) -> MemoryWriter:
        """The conversation-memory writes, in this transaction."""
        ...


class MemoryWriter(Protocol):
    """The memory events' writes (`pipeline/ingest/memory.py`), inside an `EventStore`'s
    transaction; errors as the `EventStore`'s. A session is addressed by its key
    (`pipeline.domain.memory_model.session_key`), which already holds its namespace."""

    def lock_session(self, key: uuid.UUID) -> SessionHead | None: ...

    def put_session(self, namespace: uuid.UUID, key: uuid.UUID, session_id: str,
                    user_id: str | None, metadata: dict[str, Any], event_id: str) -> None:
        """Create, update (metadata merged key by key, a null removes) or revive a session."""
        ...

    def delete_session(self, key: uuid.UUID, event_id: str) -> None:
        """Hide a session with its messages and summaries."""
        ...

    def message_sessions(self, namespace: uuid.UUID, uuids: Sequence[uuid.UUID]
                         ) -> dict[uuid.UUID, uuid.UUID]:
        """The session key of each message uuid already stored in the namespace."""
        ...

    def append_messages(self, head: SessionHead, messages: Sequence[NewMessage],
                        extractors: Sequence[str], event_id: str) -> None:
        """Store new messages after the session's last, each with a pending state row per
        extractor, and ask for the session's summariser."""
        ...

    def message_seq(self, key: uuid.UUID, message: uuid.UUID) -> int | None:
        """The seq of a visible message of the session, locked (None: no such message)."""
        ...

    def set_message_key(self, key: uuid.UUID, message: uuid.UUID, name: str,
                        value: Any, *, delete: bool) -> None: ...

    def put_summary(self, head: SessionHead, summary: uuid.UUID, content: str,
                    recent_message: uuid.UUID, recent_seq: int, event_id: str) -> bool:
        """Store an external summary, move the point forward; False: another session's uuid."""
        ...


class EventStores(Protocol):
    """Opens one `EventStore` per batch: one transaction, committed when the block ends.

    Errors as `EventStore`'s: an unreachable store raises `Unavailable` (the batch is retried).
    """

    def transaction(self) -> AbstractContextManager[EventStore]: ...

    def deferred_due(self) -> bool:
        """Whether a deferred event is due for another try (checked between batches)."""
        ...


class WorkTrigger(Protocol):
    """Tells the workers there is work (best effort: the periodic sweep finds what is missed)."""

    def embed(self, roots: Sequence[uuid.UUID]) -> None: ...

    def extract(self, roots: Sequence[uuid.UUID]) -> None:
        """Entity extraction of these roots' rows (pipeline/entities/stage.py)."""
        ...

    def relay(self) -> None: ...

    def memory(self, sessions: Sequence[uuid.UUID]) -> None:
        """The extractors and summariser of these sessions
        (`pipeline.domain.memory_model.session_key`) have work."""
        ...


class DeadLetterSink(Protocol):
    """Where rejected records go (the dead-letter topic; a replay only counts them)."""

    def send(self, letters: Sequence[Letter], timeout: float = 30.0) -> None:
        """Send and wait for every acknowledgement; raises `Unavailable` otherwise."""
        ...
