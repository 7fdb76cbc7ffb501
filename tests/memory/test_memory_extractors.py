"""Issue 12, item 2: the message extractors on the real pipeline. Every message of two tenants
gets its token count, its embedding and its entities with spans under `system`, once; a message
the embedder refuses is dead-lettered with `extractor_failed` while the rest go on (its reply,
embedded with it as context, is embedded alone); a worker
killed with -9 mid-work loses and doubles nothing; `brainstream status` shows the extractors.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC

import pytest

from pipeline.domain.chunking import count_tokens
from pipeline.domain.errors import EmbedderError
from pipeline.embedding.embedders import StaticEmbedder
from pipeline.kafka.io import DeadLetterWriter, make_producer
from pipeline.memory.extraction import MessageExtraction, message_extractor
from pipeline.memory.store.work import PgMessageWork
from pipeline.ops.status import collect
from pipeline.ports import Vectors
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.memory.memutil import add, dead_letters, message, messages_of, send
from tests.memory.workutil import all_done, extraction_states, own_worker, query, worker_paused
from tests.pipelineutil import Proc, Publisher, wait_for

pytestmark = pytest.mark.stack


def test_every_message_is_extracted_once_two_tenants(procs: dict[str, Proc], catalog: Settings,
                                                     publisher: Publisher) -> None:
    a, b, sid = uuid.uuid4(), uuid.uuid4(), "trip"
    texts = ["I flew to New York City with Caroline in May.", "ok 👍",
             "Caroline's sister Ana lives in Lisbon, Portugal."]
    send(publisher, a, sid, add(a, sid, *[message(t) for t in texts]))
    send(publisher, b, sid, add(b, sid, message("Tenant B met Rotterdam Port Authority.")))
    wait_for(lambda: all_done(catalog, a, 3), timeout=30, what="A's messages extracted")
    wait_for(lambda: all_done(catalog, b, 1), timeout=30, what="B's message extracted")

    rows = {r[0]: r[1:] for r in query(
        catalog, "SELECT content, token_count, embedding IS NOT NULL, metadata FROM messages"
        " WHERE namespace_id = %s", str(a))}
    for text in texts:
        tokens, embedded, metadata = rows[text]
        assert tokens == count_tokens(text) and embedded
        for entity in metadata["system"]["entities"]:
            for match in entity["matches"]:
                assert text[match["start"]:match["end"]] == match["text"]
    names = {e["norm"] for t in texts for e in rows[t][2]["system"]["entities"]}
    assert {"new york city", "caroline", "ana", "lisbon", "portugal"} <= names
    assert rows["ok 👍"][2]["system"]["entities"] == []
    # each extractor applied each message once (attempts count stored results)
    states = extraction_states(catalog, a)
    assert all(states.get(f"{x}:attempts=1") == 3 for x in ("token", "embed", "entities"))
    b_system = messages_of(catalog, b, sid)[0]["system"]
    assert "Rotterdam Port Authority" in {e["name"] for e in b_system["entities"]}
    extractors = collect(catalog).memory["extractors"]  # `brainstream status` shows each
    assert set(extractors) == {"token", "embed", "entities"}


class _Refusing:
    """The static embedder, refusing any batch that holds a text with POISON (a permanent
    error, as a 4xx from an embedding server would be)."""

    name = "static"
    dim = 256

    def __init__(self) -> None:
        self.inner = StaticEmbedder()

    def embed(self, texts: Sequence[str]) -> Vectors:
        if any("POISON" in t for t in texts):
            raise EmbedderError("refused: the text holds POISON")
        return self.inner.embed(texts)


def test_a_refused_message_is_dead_lettered_and_the_others_go_on(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    ns, sid = uuid.uuid4(), "poison"
    bad = message("this one holds POISON for the embedder")
    good = [message(f"message {i} about Oslo") for i in range(5)]
    with worker_paused(procs):
        send(publisher, ns, sid, add(ns, sid, good[0], bad, *good[1:]))
        wait_for(lambda: len(messages_of(catalog, ns, sid)) == 6, timeout=30,
                 what="the messages in Postgres")
        pool = make_pool(catalog, min_size=1, max_size=2, name="test-extractors")
        producer = make_producer(catalog)
        try:
            stats = MessageExtraction(catalog, PgMessageWork(pool), _Refusing(),
                                      message_extractor(catalog),
                                      DeadLetterWriter.of(producer, catalog)).run()
        finally:
            producer.close()
            pool.close()
    assert stats.failed.get("embed") == 1
    states = extraction_states(catalog, ns)
    assert states["embed:done"] == 5 and states["embed:failed"] == 1
    assert states["token:done"] == 6 and states["entities:done"] == 6
    # the reply after the refused turn: embedded and indexed by its own words (and its date)
    # only
    [(content, created)] = query(catalog, "SELECT content, created_at FROM messages"
                                 " WHERE namespace_id = %s AND uuid = %s", str(ns),
                                 good[1]["uuid"])
    day = created.astimezone(UTC)
    reply = query(catalog, "SELECT context_lexical = to_tsvector('english', %s) FROM"
                  " messages WHERE namespace_id = %s AND uuid = %s",
                  f"{day.day} {day:%B %Y}\n{content}", str(ns), good[1]["uuid"])
    assert reply == [(True,)]
    error = query(catalog, "SELECT error FROM message_extraction WHERE namespace_id = %s"
                  " AND message_uuid = %s AND extractor = 'embed'", str(ns), bad["uuid"])
    assert "POISON" in error[0][0]
    letters = wait_for(lambda: dead_letters(catalog, [bad["uuid"]]), timeout=15,
                       what="the dead letter")
    headers = dict(letters[bad["uuid"]])
    assert headers["brainstream.error.code"] == "extractor_failed"


@pytest.mark.slow  # a kill -9 and a restart: `make faults` runs it
def test_worker_kill9_mid_extraction_loses_and_doubles_nothing(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    ns, total = uuid.uuid4(), 300
    with worker_paused(procs):
        for s in range(3):
            sid = f"kill-{s}"
            for start in range(0, total // 3, 50):
                send(publisher, ns, sid, add(ns, sid, *[
                    message(f"Turn {start + i} of {sid}: Maria booked Hotel Aurora in Rome.")
                    for i in range(50)]))
        wait_for(lambda: query(catalog, "SELECT count(*) FROM messages WHERE namespace_id = %s",
                               str(ns))[0][0] == total, timeout=30, what="the messages stored")
    with own_worker(procs, BRAINSTREAM_MEMORY_EXTRACT_BATCH_SIZE="2",
                    BRAINSTREAM_MEMORY_EXTRACT_LEASE_SECONDS="3") as worker:
        at_kill = wait_for(lambda: (s := extraction_states(catalog, ns)).get("token:done", 0)
                           >= 20 and s, timeout=30, interval=0.02, what="extraction under way")
        worker.kill9()
        killed = extraction_states(catalog, ns)
        assert sum(killed.get(f"{x}:done", 0) for x in ("token", "embed", "entities")) \
            < 3 * total, f"the worker had finished before the kill: {killed}"
        worker.start()
        done = wait_for(lambda: all_done(catalog, ns, total), timeout=150,
                        what="every message extracted after the restart")
    assert all(done.get(f"{x}:attempts=1") == total for x in ("token", "embed", "entities")), \
        f"some result was stored twice (or never): {done}, at the kill {at_kill}"
    assert query(catalog, "SELECT count(*) FROM messages WHERE namespace_id = %s AND"
                 " (token_count IS NULL OR embedding IS NULL OR metadata -> 'system' -> 'entities'"
                 " IS NULL)", str(ns)) == [(0,)]
