"""The write path's port: the Postgres adapter turns driver errors into the port's, and the
write path decides from those alone which failure retries the batch and which dead-letters one
event (with which code). No database: the adapter runs on a stand-in connection that fails where
a test tells it to."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from typing import Any, get_args

import psycopg
import pytest
from psycopg_pool import PoolTimeout

from pipeline.domain.errors import RejectedByDatabase, Unavailable
from pipeline.domain.kinds import KindCatalog
from pipeline.ingest.apply import HANDLERS
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import IngestOptions, RawRecord
from pipeline.ingest.store.events import PgEventStore, PgEventStores
from schemas.events import Payload


class _Conn:
    """Just enough of a psycopg connection for `PgEventStore.savepoint`; `broken` as psycopg
    sets it once the server is gone."""

    closed = False

    def __init__(self, broken: bool = False) -> None:
        self.broken = broken

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        yield

    def execute(self, query: Any, params: Any = None) -> None:
        """The savepoint's own statements (SAVEPOINT, RELEASE, ROLLBACK TO) succeed."""


class _Store(PgEventStore):
    """The adapter's savepoint and error translation; the SQL replaced by `fail`, raised where a
    put writes its rows."""

    def __init__(self, fail: BaseException | None, *, broken: bool = False) -> None:
        super().__init__(_Conn(broken))  # type: ignore[arg-type]
        self.fail = fail
        self.enqueued: list[tuple[Any, ...]] = []

    def load_catalog(self) -> KindCatalog:
        return KindCatalog([])

    def set_event_time(self, at: Any) -> None:
        pass

    def claim_event(self, *args: Any) -> bool:
        return True

    def lock_object(self, object_id: uuid.UUID) -> None:
        return None

    def lock_objects(self, ids: Any) -> dict[uuid.UUID, Any]:
        return {}

    def claim_events(self, events: Any) -> set[tuple[Any, ...]]:
        return {event[:3] for event in events}

    def chunked_parts_of(self, parent_id: uuid.UUID) -> list[tuple[uuid.UUID, int]]:
        return []

    def delete_rows(self, ids: Any) -> None:
        pass

    def upsert_objects(self, rows: Any) -> list[uuid.UUID]:
        if self.fail is not None:
            raise self.fail
        return []

    def enqueue(self, *args: Any) -> None:
        self.enqueued.append(args)

    def due_deferred(self, limit: int) -> list[Any]:
        return []


def _put_record() -> RawRecord:
    event = {"specversion": "1.0", "id": str(uuid.uuid4()), "source": "tests",
             "type": "brainstream.object.put", "namespace": str(uuid.uuid4()),
             "data": {"id": str(uuid.uuid4()), "kind": "company", "title": "Acme"}}
    return RawRecord("events", 0, 7, None, json.dumps(event).encode())


def test_every_payload_type_has_a_handler() -> None:
    assert set(HANDLERS) == set(get_args(Payload))


def test_a_put_applies_and_queues_its_node() -> None:
    store = _Store(None)
    outcome = apply_batch(store, [_put_record()], IngestOptions())
    assert (outcome.applied, outcome.dead, outcome.outbox_rows) == (1, [], 1)
    assert store.enqueued[0][2] == "node_sync"


def test_a_value_postgres_refuses_dead_letters_that_event() -> None:
    outcome = apply_batch(_Store(psycopg.errors.UntranslatableCharacter("bad \\u0000")),
                          [_put_record()], IngestOptions())
    assert outcome.applied == 0 and len(outcome.dead) == 1
    error = outcome.dead[0].error
    assert isinstance(error, RejectedByDatabase)
    assert (error.code, error.message) == (
        "rejected_by_database", "UntranslatableCharacter: bad \\u0000 (SQLSTATE 22P05)")


@pytest.mark.parametrize("exc", [
    psycopg.errors.ProgramLimitExceeded("string is too long for tsvector"),  # 54000
    psycopg.errors.IndexCorrupted("index row size 8032 exceeds btree maximum"),  # XX002
    psycopg.errors.CheckViolation("violates check constraint"),  # 23514
    psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes"),  # client-side
])
def test_an_error_of_the_statement_on_a_live_connection_dead_letters_that_event(
        exc: psycopg.Error) -> None:
    outcome = apply_batch(_Store(exc), [_put_record()], IngestOptions())
    assert [d.error.code for d in outcome.dead] == ["rejected_by_database"]
    assert outcome.dead[0].error.message.startswith(type(exc).__name__)


@pytest.mark.parametrize(("exc", "broken"), [
    (psycopg.OperationalError("server closed the connection"), True),
    (psycopg.errors.DeadlockDetected("deadlock detected"), False),
    (psycopg.errors.AdminShutdown("terminating connection"), False),  # 57P01
    (psycopg.errors.DiskFull("could not extend file"), False),  # 53100
    # whatever the class, a statement on a connection that broke under it is not its fault
    (psycopg.errors.ProgramLimitExceeded("string is too long for tsvector"), True),
])
def test_an_unreachable_database_fails_the_batch(exc: Exception, broken: bool) -> None:
    with pytest.raises(Unavailable) as raised:
        apply_batch(_Store(exc, broken=broken), [_put_record()], IngestOptions())
    assert raised.value.__cause__ is exc


def test_an_unexpected_error_dead_letters_that_event_as_internal() -> None:
    outcome = apply_batch(_Store(RuntimeError("a bug")), [_put_record()], IngestOptions())
    assert [(d.error.code, d.error.message) for d in outcome.dead] == [
        ("internal", "RuntimeError: a bug")]


def test_a_run_of_puts_applies_together() -> None:
    store = _Store(None)
    outcome = apply_batch(store, [_put_record() for _ in range(3)], IngestOptions())
    assert (outcome.applied, outcome.dead, outcome.outbox_rows) == (3, [], 3)
    assert [e[2] for e in store.enqueued] == ["node_sync"] * 3


def test_a_run_of_puts_postgres_refuses_goes_one_by_one() -> None:
    outcome = apply_batch(_Store(psycopg.errors.CheckViolation("violates check constraint")),
                          [_put_record() for _ in range(3)], IngestOptions())
    assert [d.error.code for d in outcome.dead] == ["rejected_by_database"] * 3


@pytest.mark.parametrize(("exc", "broken"), [
    (psycopg.OperationalError("server closed the connection"), True),
    (psycopg.errors.DeadlockDetected("deadlock detected"), False),
])
def test_an_unreachable_database_fails_the_batch_of_a_run_of_puts(exc: Exception,
                                                                  broken: bool) -> None:
    with pytest.raises(Unavailable) as raised:
        apply_batch(_Store(exc, broken=broken), [_put_record() for _ in range(3)],
                    IngestOptions())
    assert raised.value.__cause__ is exc


class _Pool:
    """A pool whose connections time out."""

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        raise PoolTimeout("couldn't get a connection after 30.00 sec")
        yield


def test_a_pool_timeout_is_unavailable() -> None:
    stores = PgEventStores(_Pool())  # type: ignore[arg-type]
    with pytest.raises(Unavailable), stores.transaction():
        pass
    with pytest.raises(Unavailable):
        stores.deferred_due()
