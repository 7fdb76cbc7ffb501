"""`brainstream status` shows every backlog: the read hosts' lexical replicas (each one's lag
behind the change log), curators' decisions pending, the proposal pass's queue (per namespace)
and the Celery queues in Redis, in JSON and text. On a database and a Redis database of this
test only, so no live worker drains them."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import psycopg
import pytest
import redis

from pipeline.settings import Settings
from tests.stackutil import fresh_database, settings_env

pytestmark = pytest.mark.stack

REDIS_DB = 9  # neither the broker's (0) nor the result sets'


def _fill(settings: Settings, big: uuid.UUID, small: uuid.UUID) -> None:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        # two hosts' replicas: one has applied the log's four rows, the other none of them
        first = conn.execute("SELECT pg_current_xact_id()::text").fetchone()[0]
        for ns, roots in ((big, 3), (small, 1)):
            for _ in range(roots):
                conn.execute("INSERT INTO lexical_log (namespace_id, root_id, created_at)"
                             " VALUES (%s, %s, now() - interval '90 seconds')",
                             (ns, uuid.uuid4()))
        for name, cursor in (("host-a:current", "(SELECT max(xid) FROM lexical_log)"),
                             ("host-b:behind", f"'{first}'::xid8")):
            conn.execute(f"INSERT INTO lexical_replicas (replica, host, data_dir, cursor_xid,"
                         f" cursor_id) VALUES (%s, 'h', '/d', {cursor},"
                         f" CASE WHEN %s = 'host-a:current' THEN 1000000000 ELSE 0 END)",
                         (name, name))
        for i, ns in enumerate((big, big, small)):  # entities: queued for the pass by trigger
            conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label)"
                         " VALUES (%s, %s, %s, %s, 'NAME')",
                         (uuid.uuid4(), ns, f"Entity {i}", f"entity {i}"))
        for i, (ns, status) in enumerate(((big, "pending"), (small, "pending"),
                                           (small, "failed"), (small, "applied"))):
            conn.execute("INSERT INTO entity_decisions (namespace_id, source, event_id, decision,"
                         " from_id, to_id, decided_by, status) VALUES (%s, 'tests', %s, 'merge',"
                         " %s, %s, 'curator', %s)",
                         (ns, f"decision-{i}", uuid.uuid4(), uuid.uuid4(), status))


def test_status_shows_every_backlog(stack_settings: Settings) -> None:
    base = stack_settings.effective_redis_url.rsplit("/", 1)[0]
    settings = fresh_database(stack_settings, "status_queues", redis_url=f"{base}/{REDIS_DB}")
    big, small = uuid.uuid4(), uuid.uuid4()
    _fill(settings, big, small)
    broker = redis.Redis.from_url(settings.effective_redis_url)
    broker.flushdb()
    broker.lpush("extract", "m1", "m2")
    broker.lpush("extract\x06\x163", "m3")  # a priority list of the same queue
    broker.lpush("relay", "m4")
    broker.hset("unacked", "tag", "m5")

    env = settings_env(settings)
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "status", "--json"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    body = json.loads(done.stdout)
    replicas = {r["replica"]: r for r in body["lexical"]["replicas"]}
    assert body["lexical"]["log_rows"] == 4
    assert replicas["host-a:current"]["pending"] == 0
    assert replicas["host-a:current"]["lag_seconds"] == 0
    assert replicas["host-b:behind"]["pending"] == 4
    assert replicas["host-b:behind"]["lag_seconds"] >= 90
    assert body["proposals"]["count"] == 3
    assert body["proposals"]["namespaces"] == {str(big): 2, str(small): 1}
    assert body["decisions"]["count"] == 2 and body["decisions"]["failed"] == 1
    assert body["decisions"]["namespaces"] == {str(big): 1, str(small): 1}
    assert body["celery_queues"] == {"celery": 0, "extract": 3, "relay": 1, "unacknowledged": 1}
    assert "celery_queues" not in body["errors"] and "database" not in body["errors"]

    text = subprocess.run([sys.executable, "-m", "pipeline.cli", "status"], env=env,
                          capture_output=True, text=True, timeout=120, check=False).stdout
    assert "lexical replicas: 2 (change log: 4 rows)" in text
    assert "host-b:behind /d: lag " in text and "4 rows pending" in text
    assert "entity decisions pending: 2" in text and "1 failed" in text
    assert "entity proposal pass queue: 3" in text
    assert "celery queues: celery 0, extract 3, relay 1; 1 delivered, not acknowledged" in text
    broker.flushdb()


def test_status_reports_a_down_redis_in_its_own_line(stack_settings: Settings) -> None:
    """The Celery queues need Redis: with Redis unreachable they are an error line, and the
    Postgres queues are still shown."""
    from pipeline.ops.status import collect

    settings = stack_settings.model_copy(update={"redis_port": 1, "redis_url": None})
    report = collect(settings)
    assert "celery_queues" in report.errors and not report.celery_queues
    assert "replicas" in report.lexical and "count" in report.proposals
