"""Postgres adapter of the write path (`EventStore`, `EventStores` in `pipeline/ports.py`): the SQL
behind applying events (one connection, one transaction per batch, a savepoint per event).

Every `PgEventStore` method runs inside the caller's transaction; nothing there commits. Driver
errors become the port's (`pipeline.postgres.errors` decides which): a database that
cannot serve (a lost connection, a pool timeout, SQLSTATE classes 08, 40, 53, 57, 58)
`Unavailable`, so the batch is retried; anything else Postgres refuses (a NUL in text, a tsvector
or an index row over its limit) `RejectedByDatabase`, so that one event is dead-lettered.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from pipeline.domain.kinds import KindCatalog
from pipeline.domain.structure import RowStructure
from pipeline.domain.validity import Version
from pipeline.domain.write_model import DeferredRow, LinkHead, ObjectHead, ObjectWrite, Selection
from pipeline.entities.store import decisions
from pipeline.ingest.store import deletes, links, structure as structure_sql
from pipeline.ingest.store.catalog import read_catalog, read_relations
from pipeline.ingest.store.links import VersionKey
from pipeline.ingest.store.objects import OBJECT_COLUMNS, RECORD_OBJECT_VERSIONS, UPSERT_OBJECTS
from pipeline.memory.store.writes import PgMemoryWriter
from pipeline.outbox import store as outbox
from pipeline.outbox.store import Entry
from pipeline.postgres.errors import port_error
from pipeline.postgres.timing import EVENT_TIME

Conn = psycopg.Connection[Any]


_OBJECT_HEAD = ("SELECT id, namespace_id, kind, title, parent_id, source_version, deleted_at "
                "FROM objects")

# The ledger claim of a run of events (`PgEventStore.claim_events`): the rows returned are the
# events claimed now; one already there (a duplicate) is left as it is.
_CLAIM_EVENTS = """
INSERT INTO processed_events (namespace_id, source, event_id, event_type, outcome)
SELECT e.ns, e.source, e.id, e.type, 'applied'
FROM unnest(%(ns)s::uuid[], %(source)s::text[], %(id)s::text[], %(type)s::text[])
     AS e(ns, source, id, type)
ON CONFLICT DO NOTHING
RETURNING namespace_id, source, event_id
"""


@contextlib.contextmanager
def _driver_errors(conn: Conn | None) -> Iterator[None]:
    """Raise the port's errors for the driver's raised on `conn` (None: while getting one)."""
    try:
        yield
    except psycopg.Error as exc:  # psycopg_pool.PoolTimeout is one
        raise port_error(exc, conn) from exc


# The savepoint each event runs in (`PgEventStore.savepoint`); one name, since at most one is
# open at a time.
_SAVEPOINT = sql.Identifier("brainstream_event")


class PgEventStores:
    """Opens one `PgEventStore` per batch, on a pooled connection."""

    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool

    @contextlib.contextmanager
    def transaction(self) -> Iterator[PgEventStore]:
        """One connection and transaction, committed when the block ends without error."""
        with _driver_errors(None), self.pool.connection() as conn, \
                _driver_errors(conn), conn.transaction():
            yield PgEventStore(conn)

    def deferred_due(self) -> bool:
        """Whether a deferred event is due for another try."""
        with _driver_errors(None), self.pool.connection() as conn, _driver_errors(conn):
            row = conn.execute("SELECT EXISTS (SELECT 1 FROM deferred_events"
                               " WHERE next_attempt_at <= now())").fetchone()
        return bool(row and row[0])


class PgEventStore:
    """The write path's view of Postgres, bound to one connection in a transaction.

    Each round trip waits for the backend and then for the consumer to be scheduled again, which
    on a loaded machine costs milliseconds, so three statements per event ride with others: an
    applied event's RELEASE and the next event's time go with that event's SAVEPOINT (the commit
    releases the last one), and the applied events' outbox rows are written by `flush`, all in
    one statement, before the commit (bench.ingest; 10.25 -> 4.25 round trips per SciFact
    put, with the single-statement upsert).
    """

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self._event_time: datetime | None = None  # what brainstream.event_time holds
        self._next_time: datetime | None = None  # what the next event's writes are stamped with
        self._unreleased = False  # the savepoint of the last event applied awaits its RELEASE
        self._depth = 0  # savepoints open
        self._outbox: list[Entry] = []  # rows of the events applied (or being applied)
        self._now: datetime | None = None  # the transaction's time, once read
        self._memory = PgMemoryWriter(conn)

    @property
    def memory(self) -> PgMemoryWriter:
        """The conversation-memory writes, on this transaction."""
        return self._memory

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        """Undo one event's writes on error without losing the rest of the batch.

        Opening it is one round trip: the RELEASE of the previous event's savepoint (left open
        when it ended well) and the event time (`set_event_time`) go with the SAVEPOINT. The
        time is set outside the savepoint, as before, so a rollback does not undo it. A
        savepoint opened inside another is psycopg's own."""
        if self._depth:
            outbox_mark = len(self._outbox)
            try:
                with _driver_errors(self.conn), self.conn.transaction():
                    yield
            except BaseException:
                del self._outbox[outbox_mark:]
                raise
            return
        statements = []
        if self._unreleased:
            statements.append(sql.SQL("RELEASE SAVEPOINT {}").format(_SAVEPOINT))
        if self._next_time != self._event_time:
            at = self._next_time
            statements.append(sql.SQL("SELECT set_config('brainstream.event_time', {}, true)")
                              .format(sql.Literal("" if at is None else at.isoformat())))
        statements.append(sql.SQL("SAVEPOINT {}").format(_SAVEPOINT))
        with _driver_errors(self.conn):
            # no parameters: the simple query protocol, several statements in one message
            self.conn.execute(sql.SQL("; ").join(statements))
        self._unreleased, self._event_time = False, self._next_time
        outbox_mark = len(self._outbox)
        self._depth = 1
        try:
            with _driver_errors(self.conn):
                yield
        except BaseException:
            del self._outbox[outbox_mark:]
            if not (self.conn.broken or self.conn.closed):  # else the batch is retried anyway
                with _driver_errors(self.conn):
                    self.conn.execute(sql.SQL("ROLLBACK TO SAVEPOINT {0}; RELEASE SAVEPOINT {0}")
                                      .format(_SAVEPOINT))
            raise
        finally:
            self._depth = 0
        self._unreleased = True

    def flush(self) -> None:
        """Write the outbox rows of the events applied, in their order, with one statement (in
        this transaction, before its commit)."""
        if self._outbox:
            with _driver_errors(self.conn):
                outbox.enqueue_many(self.conn, self._outbox)
            self._outbox.clear()

    # -- events ledger --------------------------------------------------------------------

    def claim_event(self, namespace: uuid.UUID, source: str, event_id: str,
                    event_type: str) -> bool:
        """Record the event as processed; False when it already was (a duplicate)."""
        cur = self.conn.execute(
            "INSERT INTO processed_events (namespace_id, source, event_id, event_type, outcome)"
            " VALUES (%s, %s, %s, %s, 'applied') ON CONFLICT DO NOTHING RETURNING 1",
            (namespace, source, event_id, event_type),
        )
        return cur.fetchone() is not None

    def claim_events(self, events: Sequence[tuple[uuid.UUID, str, str, str]]
                     ) -> set[tuple[uuid.UUID, str, str]]:
        """Record events (namespace, source, event id, type; no two alike) as processed, in
        one statement; the (namespace, source, event id) of those that were not already."""
        if not events:
            return set()
        rows = self.conn.execute(_CLAIM_EVENTS, {
            "ns": [e[0] for e in events], "source": [e[1] for e in events],
            "id": [e[2] for e in events], "type": [e[3] for e in events]}).fetchall()
        return {(r[0], r[1], r[2]) for r in rows}

    def processed(self, events: Sequence[tuple[uuid.UUID, str, str]]
                  ) -> set[tuple[uuid.UUID, str, str]]:
        """Which of the events (namespace, source, event id) the ledger holds."""
        rows = self.conn.execute(
            "SELECT p.namespace_id, p.source, p.event_id"
            " FROM unnest(%(ns)s::uuid[], %(source)s::text[], %(id)s::text[]) AS e(ns, source, id)"
            " JOIN processed_events p ON p.namespace_id = e.ns AND p.source = e.source"
            " AND p.event_id = e.id",
            {"ns": [e[0] for e in events], "source": [e[1] for e in events],
             "id": [e[2] for e in events]}).fetchall()
        return {(r[0], r[1], r[2]) for r in rows}

    def set_outcome(self, namespace: uuid.UUID, source: str, event_id: str,
                    outcome: str) -> None:
        self.conn.execute(
            "UPDATE processed_events SET outcome = %s"
            " WHERE namespace_id = %s AND source = %s AND event_id = %s",
            (outcome, namespace, source, event_id),
        )

    # -- kinds ----------------------------------------------------------------------------

    def record_entity_decision(self, namespace: uuid.UUID, source: str, event_id: str,
                               decision: str, from_id: uuid.UUID, to_id: uuid.UUID,
                               decided_by: str, note: str | None) -> None:
        """Record a curator's decision as pending (pipeline/entities/store/decisions.py)."""
        self.conn.execute(decisions.RECORD, (namespace, source, event_id, decision, from_id,
                                             to_id, decided_by, note))

    def load_catalog(self) -> KindCatalog:
        return KindCatalog(read_catalog(self.conn), read_relations(self.conn))

    # -- objects --------------------------------------------------------------------------

    def lock_object(self, object_id: uuid.UUID) -> ObjectHead | None:
        """The row of `object_id`, locked until commit (events on one object serialize)."""
        row = self.conn.cursor(row_factory=tuple_row).execute(
            _OBJECT_HEAD + " WHERE id = %s FOR UPDATE", (object_id,)).fetchone()
        return ObjectHead(*row) if row else None

    def lock_objects(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, ObjectHead]:
        """The rows of `ids` that exist, locked until commit, in one statement (in id order,
        so two batches locking overlapping sets cannot deadlock)."""
        rows = self.conn.cursor(row_factory=tuple_row).execute(
            _OBJECT_HEAD + " WHERE id = ANY(%s) ORDER BY id FOR UPDATE",
            (sorted(ids),)).fetchall()
        return {row[0]: ObjectHead(*row) for row in rows}

    def share_objects(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, ObjectHead]:
        """Rows of `ids`, share-locked (link endpoints, parents) so they cannot vanish."""
        rows = self.conn.cursor(row_factory=tuple_row).execute(
            _OBJECT_HEAD + " WHERE id = ANY(%s) FOR SHARE", (list(ids),)).fetchall()
        return {row[0]: ObjectHead(*row) for row in rows}

    def upsert_objects(self, rows: Sequence[ObjectWrite]) -> list[uuid.UUID]:
        """Insert or replace rows (reviving soft-deleted ones); the ids refused because a row
        of another namespace holds them (that row is left untouched)."""
        if not rows:
            return []
        params: dict[str, list[Any]] = {name: [getattr(row, name) for row in rows]
                                        for name in OBJECT_COLUMNS}
        params["properties"] = [Jsonb(p) for p in params["properties"]]
        written = {r[0] for r in self.conn.execute(UPSERT_OBJECTS, params).fetchall()}
        return [row.id for row in rows if row.id not in written]

    def chunked_parts_of(self, parent_id: uuid.UUID) -> list[tuple[uuid.UUID, int]]:
        """(id, position) of the parts the pipeline cut from a parent's content."""
        rows = self.conn.execute(
            "SELECT id, position FROM objects WHERE parent_id = %s AND chunked",
            (parent_id,)).fetchall()
        return [(row[0], row[1]) for row in rows]

    def explicit_parts_of(self, parent_id: uuid.UUID) -> list[tuple[uuid.UUID, str | None]]:
        """(id, content) of the parts sent with this `parent_id` (not cut by the pipeline)."""
        rows = self.conn.execute(
            "SELECT id, content FROM objects WHERE parent_id = %s AND NOT chunked",
            (parent_id,)).fetchall()
        return [(row[0], row[1]) for row in rows]

    def retitle_parts(self, parent_id: uuid.UUID, title: str | None,
                      hashes: Sequence[tuple[uuid.UUID, str]]) -> None:
        """Give parts their parent's new title and index text hash; a part whose hash changed is
        pending again (unless its embedding already is of that text), as after the upsert
        (migration 0033's trigger)."""
        if not hashes:
            return
        self.conn.execute(
            "UPDATE objects o SET context_title = %(title)s, index_text_hash = v.hash"
            " FROM unnest(%(ids)s::uuid[], %(hashes)s::text[]) AS v(id, hash)"
            " WHERE o.id = v.id AND o.parent_id = %(parent)s",
            {"title": title, "ids": [h[0] for h in hashes], "hashes": [h[1] for h in hashes],
             "parent": parent_id})

    def set_event_time(self, at: datetime | None) -> None:
        """Stamp the writes of the events applied from now on (from the next `savepoint`) with
        `at` (None: the transaction's own time); set with that savepoint, no round trip."""
        self._next_time = at

    def write_structure(self, namespace: uuid.UUID, root_id: uuid.UUID, put_id: uuid.UUID,
                        row_ids: Sequence[uuid.UUID], rows: Sequence[RowStructure] | None,
                        event_id: str) -> None:
        """The put's supplied structure and facts (pipeline/ingest/store/structure.py)."""
        with _driver_errors(self.conn):
            structure_sql.write_structure(self.conn, namespace, root_id, put_id, row_ids, rows,
                                          event_id)

    def invalidate_facts(self, object_id: uuid.UUID, event_id: str) -> None:
        """The deleted object's facts are no longer believed."""
        with _driver_errors(self.conn):
            structure_sql.invalidate_facts(self.conn, object_id, event_id)

    def delete_rows(self, ids: Sequence[uuid.UUID]) -> None:
        """Hard-delete derived rows (stale chunks)."""
        if ids:
            self.conn.execute("DELETE FROM objects WHERE id = ANY(%s)", (list(ids),))

    def set_caller_vector(self, ids: Sequence[uuid.UUID], vector: Sequence[float] | None,
                          model: str) -> None:
        """Give rows a caller's vector, or take a caller's vector back (the row is pending for
        the model again); the reuse of stored vectors never finds one (`model` is no model
        key), and the embedding stage's write-back never replaces one."""
        if vector is not None:
            self.conn.execute(
                "UPDATE object_embeddings e SET embedding = %s::vector,"
                " embedded_hash = o.index_text_hash,"
                " model = %s, embed_status = 'done', embed_attempts = 0, embed_error = NULL,"
                " embed_lease_until = NULL FROM objects o WHERE o.id = e.id"
                " AND e.id = ANY(%s)",
                ("[" + ",".join(repr(float(v)) for v in vector) + "]", model, list(ids)))
            return
        self.conn.execute(
            "UPDATE object_embeddings SET embedding = NULL, embedded_hash = NULL, model = NULL,"
            " embed_status = 'pending', embed_attempts = 0, embed_error = NULL,"
            " embed_lease_until = NULL, queued_at = now()"
            " WHERE id = ANY(%s) AND model LIKE 'caller:%%'", (list(ids),))

    def keep_caller_vectors(self, root: uuid.UUID) -> None:
        """Rows of `root` with a caller's vector, made pending by a new index text, are
        embedded again at once: the vector is the caller's, not the text's."""
        self.conn.execute(
            "UPDATE object_embeddings SET embed_status = 'done', embedded_hash = index_text_hash"
            " WHERE root_id = %s AND embed_status = 'pending' AND model LIKE 'caller:%%'"
            " AND embedding IS NOT NULL", (root,))

    def soft_delete_object(self, object_id: uuid.UUID, version: int | None,
                           event_id: str) -> None:
        """Hide an object and its visible parts (with the same timestamp, so a re-put of the
        parent revives exactly the parts this delete hid)."""
        self.conn.execute(
            f"WITH t AS (SELECT {EVENT_TIME} AS at)"
            " UPDATE objects SET deleted_at = (SELECT at FROM t), updated_at = (SELECT at FROM t),"
            " source_version = coalesce(%s, source_version), event_id = %s"
            " WHERE id = %s AND deleted_at IS NULL",
            (version, event_id, object_id),
        )
        self.conn.execute(
            "UPDATE objects p SET deleted_at = o.deleted_at, updated_at = o.deleted_at"
            " FROM objects o WHERE o.id = %s AND p.parent_id = o.id AND p.deleted_at IS NULL",
            (object_id,),
        )

    def soft_delete_matching(self, namespace: uuid.UUID, selection: Selection, *, limit: int,
                             event_id: str) -> list[uuid.UUID]:
        """Hide the first `limit` matching objects and their parts (ingest/store/deletes.py)."""
        return deletes.soft_delete_matching(self.conn, namespace, selection, limit=limit,
                                            event_id=event_id)

    def revive_parts(self, parent_id: uuid.UUID, deleted_at: datetime) -> None:
        """Bring back the parts hidden together with their parent."""
        self.conn.execute(
            f"UPDATE objects SET deleted_at = NULL, updated_at = {EVENT_TIME}"
            " WHERE parent_id = %s AND deleted_at = %s",
            (parent_id, deleted_at),
        )

    # -- links ----------------------------------------------------------------------------

    def lock_link(self, from_id: uuid.UUID, relation_type: str,
                  to_id: uuid.UUID) -> LinkHead | None:
        row = self.conn.execute(
            "SELECT namespace_id, source_version, deleted_at FROM links"
            " WHERE from_id = %s AND relation_type = %s AND to_id = %s FOR UPDATE",
            (from_id, relation_type, to_id),
        ).fetchone()
        return LinkHead(*row) if row else None

    def link_group(self, from_id: uuid.UUID, relation_type: str, to_id: uuid.UUID | None
                   ) -> tuple[list[tuple[VersionKey, Version]], dict[uuid.UUID, int]]:
        """The believed versions of a link group, locked (ingest/store/links.py)."""
        return links.group_versions(self.conn, from_id, relation_type, to_id)

    def write_link_versions(self, namespace: uuid.UUID, from_id: uuid.UUID, relation_type: str,
                            invalidate: Sequence[VersionKey],
                            insert: Sequence[tuple[Version, str]], last: dict[uuid.UUID, int],
                            *, at: datetime, event_ref: str) -> None:
        """Invalidate and insert versions of a group (ingest/store/links.py)."""
        links.write_versions(self.conn, namespace, from_id, relation_type, invalidate, insert,
                             last, at=at, event_ref=event_ref)

    def set_link_state(self, namespace: uuid.UUID, from_id: uuid.UUID, relation_type: str,
                       to_id: uuid.UUID, meta: dict[str, Any] | None, *, at: datetime,
                       event_id: str, version: int | None, fallback_meta: dict[str, Any]
                       ) -> None:
        """The link's current-state row: live with `meta`, or soft-deleted (None)."""
        links.set_link_state(self.conn, namespace, from_id, relation_type, to_id, meta, at=at,
                             event_id=event_id, version=version, fallback_meta=fallback_meta)

    def event_time(self) -> datetime:
        """The time the current event's writes are stamped with: its record's, else the
        transaction's."""
        if self._next_time is not None:
            return self._next_time
        if self._now is None:
            row = self.conn.execute("SELECT now()").fetchone()
            assert row is not None
            self._now = row[0]
        return self._now

    def record_object_versions(self, versions: Sequence[tuple[uuid.UUID, str, str,
                                                              int | None]]) -> None:
        """Append a version (object id, change, event id, event version) of each object as its
        row now is (ingest/store/objects.py)."""
        if versions:
            self.conn.execute(RECORD_OBJECT_VERSIONS, {
                "id": [v[0] for v in versions], "change": [v[1] for v in versions],
                "event": [v[2] for v in versions], "version": [v[3] for v in versions]})

    # -- deferred events --------------------------------------------------------------------

    def is_waiting(self, wait_key: str, *, before: int | None = None) -> bool:
        """Whether an (earlier) event about the same thing is deferred: later ones queue."""
        row = self.conn.execute(
            "SELECT 1 FROM deferred_events WHERE wait_key = %s AND (%s::bigint IS NULL OR id < %s)"
            " LIMIT 1", (wait_key, before, before)).fetchone()
        return row is not None

    def defer(self, *, namespace: uuid.UUID, source: str, event_id: str, wait_key: str,
              topic: str, partition: int, offset: int, key: bytes | None, value: bytes,
              headers: Sequence[tuple[str, bytes]], code: str, reason: str,
              field: str | None, record_time: datetime | None = None) -> None:
        """Park an event until what it waits for arrives (a redelivery is parked once)."""
        encoded = [[k, v.hex()] for k, v in headers]
        self.conn.execute(
            "INSERT INTO deferred_events (namespace_id, source, event_id, wait_key, topic,"
            " partition, \"offset\", record_key, record_value, record_headers, reason_code,"
            " reason, reason_field, record_time)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (namespace_id, source, event_id) DO NOTHING",
            (namespace, source, event_id, wait_key, topic, partition, offset, key, value,
             Jsonb(encoded), code, reason, field, record_time),
        )

    def due_deferred(self, limit: int) -> list[DeferredRow]:
        """Deferred events whose next try is due, oldest first, locked for this transaction."""
        rows = self.conn.execute(
            "SELECT id, wait_key, topic, partition, \"offset\", record_key, record_value,"
            " record_headers, reason_code, reason, reason_field,"
            " extract(epoch FROM now() - first_seen)::float8, attempts, record_time"
            " FROM deferred_events WHERE next_attempt_at <= now() ORDER BY id LIMIT %s"
            " FOR UPDATE SKIP LOCKED", (limit,)).fetchall()
        return [DeferredRow(r[0], r[1], r[2], r[3], r[4], r[5], bytes(r[6]),
                            tuple((k, bytes.fromhex(v)) for k, v in r[7]), r[8], r[9], r[10],
                            r[11], r[12], r[13]) for r in rows]

    def drop_deferred(self, row_id: int) -> None:
        self.conn.execute("DELETE FROM deferred_events WHERE id = %s", (row_id,))

    def postpone_deferred(self, row_id: int, delay: float) -> None:
        self.conn.execute(
            "UPDATE deferred_events SET attempts = attempts + 1,"
            " next_attempt_at = now() + make_interval(secs => %s) WHERE id = %s",
            (delay, row_id))

    # -- outbox ---------------------------------------------------------------------------

    def enqueue(self, namespace: uuid.UUID, aggregate_id: uuid.UUID, op: str,
                payload: dict[str, Any] | None = None) -> None:
        """Record what the graph must do, in this transaction (the transactional outbox): kept
        with the event's savepoint (dropped if it rolls back), written by `flush`."""
        self._outbox.append(Entry(namespace, aggregate_id, op, payload))
