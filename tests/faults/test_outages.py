"""Service outages under load: the graph down during ingest, the Celery broker's Redis wiped.

Postgres is the source of truth and must keep taking writes; the derived work (graph projection,
embeddings) must catch up on its own once the service is back, through the outbox retries and
the periodic sweep.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
import redis

from pipeline.services.redis import FalkorDBService
from pipeline.settings import Settings
from tests.faults.faultutil import (
    ProcSet,
    assert_graph_matches_postgres,
    link,
    long_content,
    ns_counts,
    pg_edges,
    publish_fast,
    rows,
    wait_converged,
)
from tests.pipelineutil import put, wait_for

pytestmark = [pytest.mark.stack, pytest.mark.slow]
log = logging.getLogger(__name__)


def _objects(ns: uuid.UUID, count: int, label: str) -> list[tuple[dict[str, Any], str]]:
    events = []
    for i in range(count):
        extra: dict[str, Any] = {"content": long_content(f"{label}{i}", paragraphs=2)} \
            if i % 5 == 0 else {"properties": {"industry": "outage"}}
        event = put(ns, kind="company", title=f"{label} {i}", **extra)
        events.append((event, event["data"]["id"]))
    return events


def _links(ns: uuid.UUID, ids: list[str], every: int = 2) -> list[tuple[dict[str, Any], str]]:
    n = len(ids)
    return [(link(ns, ids[i], ids[(i * 3 + 1) % n], "partner", f"partners {i}"), ids[i])
            for i in range(0, n, every)]


def _ingest(settings: Settings, ns: uuid.UUID, count: int, label: str, *,
            timeout: float = 45.0) -> int:
    """Publish objects, then links between them; wait until Postgres has all. Returns links."""
    events = _objects(ns, count, label)
    publish_fast(settings, events)
    wait_for(lambda: ns_counts(settings, ns)["first_class"] == count, timeout=timeout,
             what=f"{count} objects in Postgres")
    links = _links(ns, [key for _, key in events])
    publish_fast(settings, links)
    wait_for(lambda: len(pg_edges(settings, ns)) == len(links), timeout=timeout,
             what=f"{len(links)} links in Postgres")
    return len(links)


def _falkordb_running(settings: Settings) -> None:
    """Start FalkorDB if it is down (other tests share the stack)."""
    service = FalkorDBService(settings)
    service.start()  # no-op when it runs; waits until it answers and its indexes are built
    service.probe()


def test_graph_outage_does_not_block_ingest_and_the_backlog_drains(
        pipeline_procs: ProcSet) -> None:
    procs = pipeline_procs
    settings = procs.settings
    ns = uuid.uuid4()
    count = 150
    falkordb = FalkorDBService(settings)
    try:
        assert falkordb.stop(), "FalkorDB was not running"
        assert falkordb.running_pid() is None
        # The consumer is not blocked: every object and link lands in Postgres.
        links = _ingest(settings, ns, count, "outage")
        # Embedding only writes Postgres: it goes on without the graph.
        wait_for(lambda: ns_counts(settings, ns)["pending"] == 0, timeout=60,
                 what="embeddings during the graph outage")
        # The relay tried, failed, and recorded why on the rows it will retry.
        failed = wait_for(lambda: rows(
            settings, "SELECT count(*), max(attempts), min(last_error) FROM outbox"
            " WHERE namespace_id = %s AND done_at IS NULL AND attempts > 0"
            " AND last_error IS NOT NULL", ns)[0][0] > 0 and rows(
            settings, "SELECT count(*), max(attempts), min(last_error) FROM outbox"
            " WHERE namespace_id = %s AND done_at IS NULL AND attempts > 0", ns)[0],
            timeout=30, what="failed relay attempts recorded on the outbox")
        during = ns_counts(settings, ns)
        assert during["backlog"] >= count + links, during  # nothing of ns reached the graph
        assert "unavailable" in str(failed[2]), failed
        procs.assert_alive("consumer", "worker", "relay")
    finally:
        _falkordb_running(settings)
    converged = wait_converged(settings, ns, objects=count, timeout=90, procs=procs)
    assert converged["failed"] == 0
    assert_graph_matches_postgres(settings, ns)
    assert rows(settings, "SELECT count(*) FROM outbox WHERE namespace_id = %s"
                " AND attempts > 0 AND done_at IS NOT NULL", ns)[0][0] >= 1
    log.info("graph outage: failed rows %s, during %s, converged %s", failed, during, converged)


def test_worker_started_during_graph_outage_still_embeds(pipeline_procs: ProcSet) -> None:
    procs = pipeline_procs
    settings = procs.settings
    ns = uuid.uuid4()
    count = 20
    falkordb = FalkorDBService(settings)
    try:
        assert falkordb.stop(), "FalkorDB was not running"
        procs.start("worker")  # a fresh worker (a restart, a new replica) while the graph is down
        _ingest(settings, ns, count, "fresh")
        wait_for(lambda: ns_counts(settings, ns)["pending"] == 0, timeout=20,
                 what="a worker started during the graph outage to embed")
    finally:
        _falkordb_running(settings)
    wait_converged(settings, ns, objects=count, timeout=60, procs=procs)
    assert_graph_matches_postgres(settings, ns)


def _celery_redis(settings: Settings) -> redis.Redis:
    return redis.Redis.from_url(settings.effective_redis_url, socket_timeout=5)


def test_lost_task_messages_are_recovered_by_the_sweep(pipeline_procs: ProcSet) -> None:
    procs = pipeline_procs
    settings = procs.settings
    ns = uuid.uuid4()
    count = 120
    procs.stop("worker", "extract", "relay")  # the consumer's triggers pile up in Redis
    links = _ingest(settings, ns, count, "flushq")
    broker = _celery_redis(settings)
    queues = ("celery", "extract", "relay")
    queued = sum(int(broker.llen(queue)) for queue in queues)
    assert queued > 0, "the consumer queued no task"
    broker.flushall()
    assert sum(int(broker.llen(queue)) for queue in queues) == 0
    before = ns_counts(settings, ns)
    assert before["pending"] == before["objects"] and before["backlog"] == count + links
    procs.start("worker", "extract", "relay")
    converged = wait_converged(settings, ns, objects=count, timeout=60, procs=procs)
    assert converged["failed"] == 0
    assert_graph_matches_postgres(settings, ns)
    log.info("flush with workers down: %d tasks lost, converged %s", queued, converged)


def test_redis_flush_under_a_running_pipeline_is_recovered(pipeline_procs: ProcSet) -> None:
    procs = pipeline_procs
    settings = procs.settings
    ns = uuid.uuid4()
    count = 120
    events = _objects(ns, count, "flushrun")
    publish_fast(settings, events)
    wait_for(lambda: ns_counts(settings, ns)["first_class"] > 0, timeout=45, interval=0.02,
             what="the first objects in Postgres")
    # Queued and in-flight task messages (and kombu's bindings) vanish under live connections.
    _celery_redis(settings).flushall()
    wait_for(lambda: ns_counts(settings, ns)["first_class"] == count, timeout=45,
             what=f"{count} objects in Postgres")
    converged = wait_converged(settings, ns, objects=count, timeout=60, procs=procs)
    assert_graph_matches_postgres(settings, ns)
    log.info("flush with workers up: converged %s", converged)
