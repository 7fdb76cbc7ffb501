"""The queues `brainstream status` shows besides the outbox and the embedding and extraction
backlogs: the work queues kept in Postgres (curators' decisions not applied yet, the resolver's
proposal pass), the lexical replicas of the read hosts with how far each is behind the change
log, and the Celery queues in Redis (`celery`, `extract`,
`relay`: tasks sent and not yet taken by a worker, and those taken and not yet acknowledged).

Each Postgres queue is counted with its oldest row's age and per namespace (the namespaces with
the most rows first, at most `TOP_NAMESPACES` of them), since one tenant's flood is what an
operator looks for."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from pipeline.lexical import changes

TOP_NAMESPACES = 10
# Celery's queues (workers/app.py), named here so status needs no Celery import.
CELERY_QUEUES = ("celery", "extract", "relay")
# kombu's Redis transport keeps a queue as a list of that name, plus one list per non-zero
# priority step (`name` + "\x06\x16" + step), and every delivered, unacknowledged message of
# every queue in one hash.
_PRIORITY_STEPS = (3, 6, 9)
_PRIORITY_SEP = "\x06\x16"
_UNACKED = "unacked"

# What waits in each Postgres queue: the table, and the condition of a waiting row.
_WAITING = {
    # live entities the pass has not examined (a merged one is dropped by the next pass)
    "proposals": ("entity_proposal_queue", sql.SQL(
        "EXISTS (SELECT 1 FROM entities e WHERE e.id = q.entity_id AND e.merged_into IS NULL)")),
    "decisions": ("entity_decisions", sql.SQL("status = 'pending'")),
}


def read_queue_backlogs(conn: psycopg.Connection[Any]) -> dict[str, dict[str, Any]]:
    """Per Postgres queue: rows waiting, the oldest one's age in seconds, the namespaces they
    belong to (how many, and the largest with their counts); decisions also count the failed
    ones (dead-lettered with their code, never retried)."""
    out: dict[str, dict[str, Any]] = {}
    for name, (table, waiting) in _WAITING.items():
        rows = conn.execute(sql.SQL(
            "SELECT namespace_id, count(*), extract(epoch FROM now() - min(created_at))"
            " FROM {} q WHERE {} GROUP BY namespace_id ORDER BY 2 DESC, 1").format(
                sql.Identifier(table), waiting)).fetchall()
        ages = [float(r[2]) for r in rows if r[2] is not None]
        out[name] = {"count": sum(int(r[1]) for r in rows),
                     "oldest_seconds": round(max(ages), 1) if ages else None,
                     "namespace_count": len(rows),
                     "namespaces": {str(r[0]): int(r[1]) for r in rows[:TOP_NAMESPACES]}}
    failed = conn.execute("SELECT count(*) FROM entity_decisions WHERE status = 'failed'"
                          ).fetchone()
    out["decisions"]["failed"] = int(failed[0]) if failed else 0
    return out


def read_lexical_replicas(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """The change log's rows and every registered read host's replica: its cursor's backlog
    (rows, and the oldest one's age) and when it last reported."""
    row = conn.execute("SELECT count(*) FROM lexical_log").fetchone()
    now = conn.execute("SELECT now()").fetchone()
    assert now is not None
    return {"log_rows": int(row[0]) if row else 0,
            "replicas": [{"replica": r.replica, "host": r.host, "data_dir": r.data_dir,
                          "pending": r.pending, "lag_seconds": round(r.lag_seconds, 1),
                          "seen_seconds_ago": round((now[0] - r.seen_at).total_seconds(), 1),
                          "built_at": r.built_at.isoformat()}
                         for r in changes.replicas(conn)]}


def read_celery_queues(redis_url: str) -> dict[str, int]:
    """Messages waiting in each Celery queue, and `unacknowledged`: delivered to a worker (of
    any queue) and not acknowledged yet (running, or held by a worker that died: redelivered
    after the visibility timeout)."""
    import redis

    with redis.Redis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=3) as client:
        pipe = client.pipeline(transaction=False)
        for queue in CELERY_QUEUES:
            pipe.llen(queue)
            for step in _PRIORITY_STEPS:
                pipe.llen(f"{queue}{_PRIORITY_SEP}{step}")
        pipe.hlen(_UNACKED)
        lengths = [int(n) for n in pipe.execute()]
    per = 1 + len(_PRIORITY_STEPS)
    out = {queue: sum(lengths[i * per:(i + 1) * per]) for i, queue in enumerate(CELERY_QUEUES)}
    out["unacknowledged"] = lengths[-1]
    return out
