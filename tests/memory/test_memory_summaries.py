"""Issue 12, item 3: summaries on the real pipeline. Past the window (12) the oldest
`len - window/2` messages fold into the summary and the point moves; chatter never enters it; a
large batch folds in several steps with nothing skipped; one summariser at a time per session;
the `http` summariser (an OpenAI-compatible chat endpoint, faked) and its failure, dead-lettered
with `summary_failed` while the point stays.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from pipeline.domain.chunking import count_tokens
from pipeline.embedding.embedders import StaticEmbedder
from pipeline.kafka.io import DeadLetterWriter, make_producer
from pipeline.memory.ports import Summariser
from pipeline.memory.store.fold import PgSummaryWork
from pipeline.memory.summarisers import ExtractiveSummariser, HttpSummariser
from pipeline.memory.summarising import SUMMARY_BUDGET_TOKENS, SUMMARY_MAX_STEP, SessionSummariser
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.httpserve import json_handler, serve
from tests.memory.memutil import add, dead_letters, key_of, message, send, session_row
from tests.memory.workutil import summaries_of, worker_paused
from tests.pipelineutil import Proc, Publisher, wait_for

pytestmark = pytest.mark.stack
CHATTER = ["ok", "thanks!", "👍", "lol", "sure"]


def _turns(n: int, start: int = 0) -> list[dict[str, Any]]:
    """Real turns, with chatter every third one."""
    return [message(CHATTER[i % 5] if i % 3 == 2 else
                    f"Turn {i}: we planned the Kyoto trip for week {i} with Hiroshi.",
                    role="user" if i % 2 else "assistant") for i in range(start, start + n)]


def _point(settings: Settings, ns: uuid.UUID, sid: str) -> int | None:
    row = session_row(settings, ns, sid)
    return None if row is None else int(row["summary_seq"])


def test_the_point_moves_past_the_window_without_chatter_two_tenants(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    a, b, sid = uuid.uuid4(), uuid.uuid4(), "plans"
    first = _turns(12)
    send(publisher, a, sid, add(a, sid, *first))
    send(publisher, b, sid, add(b, sid, *_turns(5)))
    wait_for(lambda: (r := session_row(catalog, a, sid)) and r["last_seq"] == 12, timeout=30,
             what="A's 12 messages")
    send(publisher, a, sid, add(a, sid, *_turns(1, 12)))  # 13 > 12: fold 13 - 6 = 7
    wait_for(lambda: _point(catalog, a, sid) == 7, timeout=30, what="the point at 7")
    [(seq, content, _status)] = wait_for(
        lambda: (s := summaries_of(catalog, a, sid)) and s[0][2] == "done" and s, timeout=30,
        what="the summary embedded")
    assert seq == 7 and content
    assert "Kyoto" in content
    for chatter in CHATTER:
        assert f": {chatter}" not in content
    assert count_tokens(content) <= SUMMARY_BUDGET_TOKENS
    # B: 5 messages, within the window: no summary, its point unmoved
    assert _point(catalog, b, sid) == 0 and summaries_of(catalog, b, sid) == []


def test_a_large_batch_folds_in_steps_and_skips_nothing(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    ns, sid = uuid.uuid4(), "big"
    turns = _turns(200)
    with worker_paused(procs):  # the whole backlog waits for one summariser run
        send(publisher, ns, sid, *[add(ns, sid, *turns[i:i + 100]) for i in (0, 100)])
        wait_for(lambda: (r := session_row(catalog, ns, sid)) and r["last_seq"] == 200,
                 timeout=30, what="200 messages")
    # four folds and the embedding of 200 messages: 30 s was too short at load 30
    wait_for(lambda: _point(catalog, ns, sid) == 194, timeout=120, what="the point at 194")
    steps = [seq for seq, _, _ in summaries_of(catalog, ns, sid)]
    max_step = SUMMARY_MAX_STEP
    assert steps == [64, 128, 192, 194] if max_step == 64 else steps[-1] == 194
    # the last summary still knows the first turns' subject (previous sentences compete)
    assert "Kyoto" in summaries_of(catalog, ns, sid)[-1][1]


class _Slow:
    """The extractive summariser, slowed down so two runs overlap."""

    name = "extractive"

    def __init__(self, started: threading.Event) -> None:
        self.inner = ExtractiveSummariser(StaticEmbedder())
        self.started = started

    def summarise(self, previous: str | None, lines: Any, budget_tokens: int) -> str:
        self.started.set()
        threading.Event().wait(1.0)
        return self.inner.summarise(previous, lines, budget_tokens)


def _service(settings: Settings, summariser: Summariser) -> tuple[SessionSummariser, Any]:
    pool = make_pool(settings, min_size=1, max_size=2, name="test-summaries")
    producer = make_producer(settings)
    service = SessionSummariser(settings, PgSummaryWork(pool), summariser, StaticEmbedder(),
                                DeadLetterWriter.of(producer, settings))
    return service, lambda: (producer.close(), pool.close())


def test_one_summariser_at_a_time_per_session(procs: dict[str, Proc], catalog: Settings,
                                              publisher: Publisher) -> None:
    ns, sid = uuid.uuid4(), "race"
    with worker_paused(procs):
        send(publisher, ns, sid, add(ns, sid, *_turns(20)))
        wait_for(lambda: (r := session_row(catalog, ns, sid)) and r["last_seq"] == 20,
                 timeout=30, what="20 messages")
        started = threading.Event()
        first, close_first = _service(catalog, _Slow(started))
        second, close_second = _service(catalog, ExtractiveSummariser(StaticEmbedder()))
        session = [uuid.UUID(key_of(ns, sid))]
        try:
            runner = threading.Thread(target=lambda: first.run(session))
            runner.start()
            started.wait(10)
            # while the first holds the session, the second finds nothing to claim
            assert second.run(session).folds == 0
            runner.join(20)
        finally:
            close_first()
            close_second()
    assert _point(catalog, ns, sid) == 14
    assert [s for s, _, _ in summaries_of(catalog, ns, sid)] == [14]


def _chat(answers: list[tuple[int, Any]]) -> Any:
    def answer(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        assert path.endswith("/chat/completions")
        return answers.pop(0) if answers else (500, {"error": "no more answers"})
    return json_handler(answer)


def test_http_summariser_and_its_failure(procs: dict[str, Proc], catalog: Settings,
                                         publisher: Publisher) -> None:
    ok_ns, bad_ns, sid = uuid.uuid4(), uuid.uuid4(), "http"
    reply = "Ana and Hiroshi planned a Kyoto trip."
    with worker_paused(procs):
        for ns in (ok_ns, bad_ns):
            send(publisher, ns, sid, add(ns, sid, *_turns(13)))
        for ns in (ok_ns, bad_ns):
            wait_for(lambda ns=ns: (r := session_row(catalog, ns, sid)) and r["last_seq"] == 13,
                     timeout=30, what="13 messages")
        answers = [(200, {"choices": [{"message": {"role": "assistant", "content": reply}}]}),
                   (400, {"error": "bad request"})]
        with serve(_chat(answers)) as url:
            service, close = _service(catalog, HttpSummariser(url, model="fake"))
            try:
                done = service.run([uuid.UUID(key_of(ok_ns, sid))])
                failed = service.run([uuid.UUID(key_of(bad_ns, sid))])
            finally:
                close()
    assert done.folds == 1 and failed.failed == 1
    assert summaries_of(catalog, ok_ns, sid) == [(7, reply, "done")]
    assert _point(catalog, bad_ns, sid) == 0 and summaries_of(catalog, bad_ns, sid) == []
    letters = wait_for(lambda: dead_letters(catalog, [key_of(bad_ns, sid)]), timeout=15,
                       what="the summary_failed dead letter")
    assert dict(letters[key_of(bad_ns, sid)])["brainstream.error.code"] == "summary_failed"
