"""Two embedding workers finishing the same root at once must still hand the root to the graph.

Regression test. EmbeddingService._store used to decide "this root and all its parts are
embedded" with a plain read inside the transaction that wrote its own rows: two workers embedding
different rows of one root (the parent in one batch, a part in another: the sweep's
`embed(None)` next to a per-root task, or a batch boundary) each saw the other's rows as still
pending, so neither enqueued the node_sync that gives the graph node its vector, and nothing ever
would (the sweep only looks at pending rows and the outbox backlog). test_crashes found it (1-2%
of the parents with parts of 1,500 puts kept a vector-less node). Here both transactions are
held just before that read until both got there (a fix that serializes completion per root
makes the first one wait for the rendezvous to time out instead), which makes the interleaving
deterministic.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from pipeline.domain.projection import Change
from pipeline.embedding.embedders.static import StaticEmbedder
from pipeline.embedding.service import EmbeddingService
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import RawRecord, ingest_options
from pipeline.ingest.store.events import PgEventStore
from pipeline.outbox.relay import OutboxRelay
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.faults.faultutil import graph_nodes_with_vector, rows
from tests.pipelineutil import put

pytestmark = [pytest.mark.stack, pytest.mark.slow]

# The completion check of EmbeddingService._store (matched loosely so a rewrite is not held).
_COMPLETION_CHECK = "x.embed_status = 'pending'"


class _Rendezvous:
    """Holds each caller until `parties` arrived or `timeout` passed (never deadlocks a fix
    that serializes the callers: the first one then just goes on after the timeout)."""

    def __init__(self, parties: int, timeout: float) -> None:
        self.parties = parties
        self.timeout = timeout
        self.arrived = 0
        self.cond = threading.Condition()

    def wait(self) -> None:
        with self.cond:
            self.arrived += 1
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.arrived >= self.parties, timeout=self.timeout)


class _HeldConnection:
    def __init__(self, conn: psycopg.Connection[Any], rendezvous: _Rendezvous) -> None:
        self._conn = conn
        self._rendezvous = rendezvous

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if isinstance(query, str) and _COMPLETION_CHECK in query:
            self._rendezvous.wait()
        return self._conn.execute(query, params, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class _HeldPool:
    """A pool whose connections pause at the completion check (see _Rendezvous)."""

    def __init__(self, pool: ConnectionPool, rendezvous: _Rendezvous) -> None:
        self._pool = pool
        self._rendezvous = rendezvous

    @contextmanager
    def connection(self) -> Iterator[_HeldConnection]:
        with self._pool.connection() as conn:
            yield _HeldConnection(conn, self._rendezvous)


class _Sink:
    def __init__(self) -> None:
        self.changes: list[Change] = []

    def publish(self, changes: Sequence[Change]) -> None:
        self.changes.extend(changes)


def test_concurrent_embedders_of_one_root_still_sync_its_node(fault_catalog: Settings) -> None:
    settings = fault_catalog.model_copy(update={"embed_batch_size": 1})
    ns = uuid.uuid4()
    event = put(ns, kind="company", title="Raced parent", content="One short part.")
    root = event["data"]["id"]
    record = RawRecord(topic=settings.topic_events, partition=0, offset=0,
                       key=root.encode(), value=json.dumps(event).encode())
    with psycopg.connect(settings.effective_postgres_dsn) as conn, conn.transaction():
        outcome = apply_batch(PgEventStore(conn), [record], ingest_options(settings))
    assert outcome.applied == 1
    assert rows(settings, "SELECT count(*) FROM objects WHERE coalesce(parent_id, id) = %s",
                root) == [(2,)]  # the parent and its one part

    pool = make_pool(settings, min_size=2, max_size=4, name="fault-embed-race")
    try:
        held = _HeldPool(pool, _Rendezvous(parties=2, timeout=2.0))
        embedder = StaticEmbedder()
        services = [EmbeddingService(settings, held, embedder)  # type: ignore[arg-type]
                    for _ in range(2)]
        results: list[Any] = [None, None]

        def work(i: int) -> None:
            try:
                results[i] = services[i].run([uuid.UUID(root)])
            except BaseException as exc:  # surfaced below
                results[i] = exc

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert all(not isinstance(r, BaseException) for r in results), results
        assert sorted(r.embedded for r in results) == [1, 1], "each worker embeds one row"
        assert rows(settings, "SELECT count(*) FILTER (WHERE embed_status = 'done')"
                    " FROM object_embeddings WHERE root_id = %s", root) == [(2,)]

        # The relay makes the graph agree with Postgres: the node must get its vector.
        relay = OutboxRelay(settings, pool, FalkorGraphWriter.from_settings(settings), _Sink())
        relay.run()
        syncs = rows(settings, "SELECT count(*) FROM outbox WHERE aggregate_id = %s"
                     " AND op = 'node_sync'", root)
        assert syncs == [(2,)], "one node_sync from the put and one once every row is embedded"
        assert graph_nodes_with_vector(settings, [root]) == 1
    finally:
        pool.close()
