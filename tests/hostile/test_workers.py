"""Hostile cases of the workers (issue 10, items 2-4 and the explicit parts' re-embedding): one
bad outbox row, one text the embedder refuses, a dead-letter re-drive whose send fails, a parent
retitled under its explicit parts. Each on the real stack and the running pipeline (`procs`)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from typing import Any

import psycopg
import pytest

from pipeline.domain.errors import Unavailable
from pipeline.domain.settings import Settings
from pipeline.kafka.io import H_CODE, H_MESSAGE, H_TOPIC, make_producer
from pipeline.ops.dlq import DeadLetter, read_all, retry
from pipeline.outbox.ops import EDGE_SYNC
from pipeline.outbox.store import backlog_by_op
from tests.pipelineutil import Proc, Publisher, indexed, put, wait_for
from tests.stackutil import settings_env

pytestmark = pytest.mark.stack


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args],
                          env=settings_env(settings), capture_output=True, text=True,
                          timeout=120, check=False)


def _one(settings: Settings, query: str, *params: Any) -> tuple[Any, ...]:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute(query, params).fetchone()
    assert row is not None
    return tuple(row)


def _letter(settings: Settings, match: Any) -> DeadLetter | None:
    return next((d for d in read_all(settings) if match(d)), None)


# -- item 2: one bad outbox row ------------------------------------------------------------


def _outbox_row(settings: Settings, row_id: int) -> dict[str, Any]:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute("SELECT failures, failed_at IS NOT NULL, done_at IS NOT NULL,"
                           " available_at > now(), last_error FROM outbox WHERE id = %s",
                           (row_id,)).fetchone()
    assert row is not None
    return dict(zip(("failures", "failed", "done", "waiting", "error"), row, strict=True))


def test_a_row_the_graph_refuses_fails_alone_and_is_redriven(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    settings = catalog
    tenant_a, tenant_b = uuid.uuid4(), uuid.uuid4()
    aggregate = uuid.uuid4()
    # An edge row whose payload lacks the link's `to` (as a buggy or older writer would leave
    # it): the relay cannot apply it, whatever the graph's state.
    (row_id,) = _one(settings, "INSERT INTO outbox (namespace_id, aggregate_id, op, payload)"
                     " VALUES (%s, %s, %s, %s) RETURNING id", tenant_a, aggregate, EDGE_SYNC,
                     json.dumps({"from": str(aggregate), "relation_type": "mentions"}))
    behind = [put(tenant_a, title="Same tenant, behind the bad row"),
              put(tenant_b, title="Other tenant, behind the bad row")]
    for event in behind:
        publisher.send(event, event["data"]["id"])

    # The bad row waits out a back-off between tries instead of being retried at once.
    wait_for(lambda: (r := _outbox_row(settings, row_id))["failures"] >= 1 and r["waiting"]
             and not r["failed"], timeout=30, interval=0.05,
             what="the refused row to wait out a back-off")
    # The rows behind it are projected (before: the relay raised on every round at the head).
    for event in behind:
        wait_for(lambda e=event: indexed(settings, e["data"]["id"]), timeout=30,
                 what="the objects behind the bad row in the graph")
    final = wait_for(lambda: (r := _outbox_row(settings, row_id))["failed"] and r, timeout=30,
                     what="the refused row to be failed")
    assert final["failures"] == 3 and not final["done"]  # BRAINSTREAM_RELAY_MAX_ATTEMPTS
    assert "KeyError" in final["error"] and "refused by the graph 3 times" in final["error"]
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        edge = {b.op: b for b in backlog_by_op(conn)}[EDGE_SYNC]
    assert edge.failed >= 1

    letter = wait_for(lambda: _letter(settings, lambda d: d.header(H_TOPIC) == "outbox"
                                      and json.loads(d.value)["outbox_id"] == row_id),
                      timeout=30, what="the outbox row's dead letter")
    assert letter.header(H_CODE) == "graph_sync_failed" and letter.key == str(aggregate).encode()
    assert "KeyError" in (letter.header(H_MESSAGE) or "")
    body = json.loads(letter.value)
    assert (body["namespace"], body["op"]) == (str(tenant_a), EDGE_SYNC)

    # After the fix (here: the row's payload), `dlq retry` re-queues the row, once.
    _one(settings, "UPDATE outbox SET payload = %s WHERE id = %s RETURNING id",
         json.dumps({"from": str(aggregate), "relation_type": "mentions",
                     "to": str(uuid.uuid4())}), row_id)
    retried = _cli(settings, "dlq", "retry", letter.ref)
    assert retried.returncode == 0, retried.stderr
    assert "1 back to the graph outbox" in retried.stdout
    wait_for(lambda: _outbox_row(settings, row_id)["done"], timeout=30,
             what="the re-driven row to be applied")
    assert "1 were re-driven before" in _cli(settings, "dlq", "retry", letter.ref).stdout


# -- item 4: a re-drive whose send fails ----------------------------------------------------


def _unreachable_producer(settings: Settings) -> Any:
    """A producer whose sends fail as with a broker that is down (nothing listens there)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return make_producer(settings, bootstrap_servers=f"127.0.0.1:{port}", api_version=(2, 5),
                         max_block_ms=1000)


def test_a_redrive_that_is_not_acknowledged_stays_redrivable(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    settings = catalog
    marker = f"redrive-{uuid.uuid4().hex}"
    publisher.send(f'{{"not json": "{marker}'.encode(), marker)

    def letters() -> list[DeadLetter]:
        return [d for d in read_all(settings) if marker.encode() in d.value]

    (letter,) = wait_for(letters, timeout=30, what="the malformed record's dead letter")
    assert letter.code == "malformed_json"

    dead = _unreachable_producer(settings)
    try:
        with pytest.raises(Unavailable) as raised:
            retry(settings, [letter], producer=dead)
    finally:
        dead.close(timeout=1)
    assert letter.ref in raised.value.message
    (marked,) = _one(settings, "SELECT count(*) FROM dlq_redrives"
                     " WHERE dlq_partition = %s AND dlq_offset = %s",
                     letter.partition, letter.offset)
    assert marked == 0  # before: marked, never sent, and skipped by every later retry

    assert retry(settings, [letter])["republished"] == 1
    # The re-driven record came back through the consumer (dead-lettered again: it is still
    # malformed), exactly once; a third retry skips it.
    wait_for(lambda: len(letters()) == 2, timeout=30, what="the re-driven record")
    assert retry(settings, [letter]) == {"republished": 0, "reembed": 0, "requeued": 0,
                                         "skipped": 1}
    assert len(letters()) == 2
