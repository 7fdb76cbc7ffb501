"""The pipeline's worker processes outlive a restart of the Redis they use as Celery's broker:
every worker (queues celery, extract, relay) reconnects and goes on consuming, in the same
process, even when a task was running while Redis went away (workers/consumer.py)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from pipeline.services.redis import RedisService
from pipeline.settings import Settings
from tests.pipelineutil import Proc, Publisher, indexed, put, wait_for
from tests.stackutil import restore_stack

pytestmark = pytest.mark.stack


@pytest.fixture()
def redis(stack_settings: Settings) -> Iterator[RedisService]:
    yield RedisService(stack_settings)
    restore_stack(stack_settings)  # Redis running again whatever the test did


def _extracted(settings: Settings, object_id: str) -> bool:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute("SELECT bool_and(status = 'done') FROM entity_extraction e"
                           " JOIN objects o ON o.id = e.row_id"
                           " WHERE o.id = %s OR o.parent_id = %s", (object_id, object_id)
                           ).fetchone()
    return bool(row and row[0])


def _sweep_waits_on(conn: psycopg.Connection[tuple[int]], table: str) -> bool:
    row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                       " AND query LIKE %s", (f"%{table}%",)).fetchone()
    return bool(row and row[0])


def test_workers_survive_a_redis_restart_with_a_task_running(
        procs: dict[str, Proc], publisher: Publisher, redis: RedisService,
        stack_settings: Settings) -> None:
    settings = stack_settings
    before = {name: proc.popen.pid for name, proc in procs.items() if proc.popen}
    # Hold the periodic sweep (queue `celery`) inside Postgres, so a task is running, its
    # message delivered and not yet acknowledged, while Redis goes away: that message is what
    # the lost connection's close tries to restore, and what the worker acks afterwards.
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as watcher, \
            psycopg.connect(settings.effective_postgres_dsn) as holder:
        holder.execute("LOCK TABLE search_vocab IN ACCESS EXCLUSIVE MODE")
        try:
            wait_for(lambda: _sweep_waits_on(watcher, "search_vocab"), timeout=20,
                     what="a sweep task to wait on the held table")
            redis.stop()
            time.sleep(2)  # an outage, not a blip: the workers see their connection refused
            redis.start()
        finally:
            holder.rollback()  # the held sweep finishes, on the connection it lost
    ns = uuid.uuid4()
    events = [put(ns, kind="note", title=f"after the restart {i}",
                  content="Acme Corporation hired Ada Lovelace in London.")
              for i in range(3)]
    for event in events:
        publisher.send(event, event["data"]["id"])
    for event in events:
        # embedded (queue celery), in the graph (relay) and its entities extracted (extract)
        wait_for(lambda e=event: indexed(settings, e["data"]["id"]), timeout=60,
                 what="an object published after the Redis restart to be indexed")
        wait_for(lambda e=event: _extracted(settings, e["data"]["id"]), timeout=60,
                 what="its entities to be extracted")
    alive = {name: proc.popen.pid for name, proc in procs.items() if proc.popen and proc.alive}
    assert alive == before, "a worker process ended with the Redis restart"
