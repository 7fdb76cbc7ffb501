"""Hostile cases of the workers (issue 10, items 2-4 and the explicit parts' re-embedding): one
bad outbox row, one text the embedder refuses, a dead-letter re-drive whose send fails, a parent
retitled under its explicit parts. Each on the real stack and the running pipeline (`procs`)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest

from pipeline.domain.errors import Unavailable
from pipeline.domain.index_text import part_index_text, text_hash
from pipeline.embedding import service as embedding_service
from pipeline.embedding.embedders import HttpEmbedder
from pipeline.embedding.embedders.static import STATIC_DIM, StaticEmbedder
from pipeline.embedding.service import EmbeddingService, EmbedStats
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import RawRecord, ingest_options
from pipeline.ingest.store.events import PgEventStore
from pipeline.kafka.io import H_CODE, H_MESSAGE, H_TOPIC, DeadLetterWriter, make_producer
from pipeline.ops.dlq import DeadLetter, read_all, retry
from pipeline.outbox.ops import EDGE_SYNC
from pipeline.outbox.store import backlog_by_op
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.httpserve import json_handler, serve
from tests.pipelineutil import Proc, Publisher, indexed, put, wait_for
from tests.stackutil import fresh_database, settings_env

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
    assert retry(settings, [letter]) == {"republished": 0, "reembed": 0, "reextract": 0,
                                         "requeued": 0, "skipped": 1, "cut": 0}
    assert len(letters()) == 2


# -- item 3: one text the embedder refuses --------------------------------------------------

MAX_INPUT_CHARS = 9000  # the fake server's limit on one input, as real servers have one


@dataclass
class RefusingEmbeddings:
    """An OpenAI-compatible embeddings server (static vectors) that refuses, with 400 as real
    servers do, any request holding a text that names `refuse` or is over MAX_INPUT_CHARS."""

    refuse: str = field(default_factory=lambda: f"refuse{uuid.uuid4().hex}")
    requests: list[tuple[int, list[str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    embedder: StaticEmbedder = field(default_factory=StaticEmbedder)

    def answer(self, inputs: list[str]) -> tuple[int, dict[str, Any]]:
        bad = [t for t in inputs if self.refuse in t or len(t) > MAX_INPUT_CHARS]
        with self.lock:
            self.requests.append((400 if bad else 200, inputs))
        if bad:
            return 400, {"error": {"message": "input refused", "type": "invalid_request_error"}}
        vectors = self.embedder.embed(inputs)
        return 200, {"object": "list", "data": [
            {"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
            for i, v in enumerate(vectors)]}


@pytest.fixture()
def refusing_server() -> Iterator[tuple[RefusingEmbeddings, str]]:
    state = RefusingEmbeddings()
    handler = json_handler(lambda _, body: state.answer([str(t) for t in body.get("input", [])]))
    with serve(handler) as url:
        yield state, url


@pytest.fixture()
def own_database(stack_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings on a fresh migrated database of the stack, so the running workers (which embed
    with the static model) do not claim the rows this test embeds through its own server."""
    monkeypatch.setattr(embedding_service, "EMBED_RETRY_ATTEMPTS", 2)
    monkeypatch.setattr(embedding_service, "EMBED_RETRY_MAX_WAIT", 0.1)
    return fresh_database(stack_settings, "workers")


def _apply(settings: Settings, events: list[dict[str, Any]]) -> None:
    records = [RawRecord("t", 0, i, None, json.dumps(e).encode()) for i, e in enumerate(events)]
    with psycopg.connect(settings.effective_postgres_dsn) as conn, conn.transaction():
        outcome = apply_batch(PgEventStore(conn), records, ingest_options(settings))
    assert not outcome.dead, [d.error.to_dict() for d in outcome.dead]


def _embed(settings: Settings, url: str) -> EmbedStats:
    pool = make_pool(settings, max_size=2)
    producer = make_producer(settings)
    try:
        with HttpEmbedder(url, dim=STATIC_DIM) as embedder:
            return EmbeddingService(settings, pool, embedder,
                                    DeadLetterWriter.of(producer, settings)).run()
    finally:
        producer.close()
        pool.close()


def _statuses(settings: Settings) -> dict[str, tuple[str, str | None]]:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        rows = conn.execute("SELECT id, embed_status, embed_error FROM object_embeddings"
                            ).fetchall()
    return {str(oid): (status, error) for oid, status, error in rows}


def test_a_text_the_embedder_refuses_fails_only_its_row(
        own_database: Settings, refusing_server: tuple[RefusingEmbeddings, str]) -> None:
    settings = own_database
    server, url = refusing_server
    tenant_a, tenant_b = uuid.uuid4(), uuid.uuid4()
    bad = put(tenant_a, kind="company", title=f"Acme {server.refuse}")
    events = [put(tenant_a, kind="company", title=f"Tenant A object {i}") for i in range(3)]
    events += [bad] + [put(tenant_b, kind="company", title=f"Tenant B object {i}")
                       for i in range(4)]
    _apply(settings, events)

    stats = _embed(settings, url)
    assert stats.claimed == len(events)  # one claimed batch, both tenants (embed_batch_size 64)
    statuses = _statuses(settings)
    bad_id = bad["data"]["id"]
    assert {oid: s for oid, (s, _) in statuses.items() if oid != bad_id} == dict.fromkeys(
        (e["data"]["id"] for e in events if e is not bad), "done")  # before: all failed
    status, error = statuses[bad_id]
    assert status == "failed" and error is not None
    assert "refused this text" in error and "400" in error
    # The refused text was isolated: the last request that held it held nothing else.
    with server.lock:
        holding = [inputs for _, inputs in server.requests if any(server.refuse in t
                                                                 for t in inputs)]
    assert holding[0] == server.requests[0][1] and len(holding[0]) == len(events)
    assert len(holding[-1]) == 1
    letter = wait_for(lambda: _letter(settings, lambda d: bad_id.encode() in d.value
                                      and d.header(H_TOPIC) == "embedding"),
                      timeout=30, what="the refused row's dead letter")
    assert letter.code == "embedding_failed" and json.loads(letter.value)["id"] == bad_id
    assert "400" in (letter.header(H_MESSAGE) or "")


def test_index_text_reaching_the_embedder_is_capped(
        own_database: Settings, refusing_server: tuple[RefusingEmbeddings, str]) -> None:
    settings = own_database
    server, url = refusing_server
    cap = embedding_service.EMBED_TEXT_CAP_CHARS
    assert cap < MAX_INPUT_CHARS
    huge = put(uuid.uuid4(), kind="company", title="word " * 400,  # the 2,000-character limit
               summary="summary " * 2000,
               properties={f"p{i:03d}": "value " * 20 for i in range(200)})
    _apply(settings, [huge])

    assert _embed(settings, url).embedded == 1  # before: refused (over the server's limit)
    assert _statuses(settings)[huge["data"]["id"]][0] == "done"
    with server.lock:
        sent = [t for _, inputs in server.requests for t in inputs]
    assert sent and max(len(t) for t in sent) <= cap


# -- also noticed: explicit parts follow their parent's title -------------------------------


def test_explicit_parts_are_reembedded_when_their_parent_is_retitled(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    settings = catalog
    tenant = uuid.uuid4()
    parent = put(tenant, kind="note", title="Kickoff with Acme")
    pid = parent["data"]["id"]
    content = "The customer asked for a pilot in March."
    part = put(tenant, kind="note", title=None, parent_id=pid, position=0, content=content)
    part_id = part["data"]["id"]
    publisher.send(parent, pid)
    publisher.send(part, pid)  # keyed by the parent: after it on one partition

    def part_row() -> tuple[Any, ...]:
        return _one(settings, "SELECT o.context_title, o.index_text_hash, e.embedded_hash,"
                    " e.embed_status, e.embedding::text FROM objects o"
                    " JOIN object_embeddings e ON e.id = o.id WHERE o.id = %s", part_id)

    def part_stored() -> bool:
        with psycopg.connect(settings.effective_postgres_dsn) as conn:
            return conn.execute("SELECT 1 FROM objects WHERE id = %s", (part_id,)).fetchone() \
                is not None

    # the parent alone may be indexed first (the consumer took it in a batch of its own)
    wait_for(lambda: part_stored() and indexed(settings, pid), timeout=30,
             what="the parent and its part")
    before = part_row()
    assert before[1] == before[2] == text_hash(part_index_text("Kickoff with Acme", content))
    retitled = put(tenant, id=pid, kind="note", title="Renewal with Globex")
    publisher.send(retitled, pid)
    want = text_hash(part_index_text("Renewal with Globex", content))
    after = wait_for(lambda: (r := part_row())[2] == want and r[3] == "done" and r,
                     timeout=30, what="the part embedded with its parent's new title")
    assert after[0] == "Renewal with Globex" and after[1] == want
    assert after[4] != before[4]  # a new vector, of the new text
    wait_for(lambda: indexed(settings, pid), timeout=30, what="the parent back in the graph")
