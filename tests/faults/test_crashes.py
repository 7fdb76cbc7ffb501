"""kill -9 of pipeline processes mid-work: nothing is lost, nothing is applied twice.

The consumer is killed while it applies a stream of puts (replayed offsets must be no-ops), and
while it applies a large batch of a burst it started far behind on (the bulk path); the
embedding worker and the relay are killed while both have a backlog (leases expire, the sweep
re-triggers, the relay re-syncs idempotently).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest
from kafka.errors import KafkaError

from pipeline.domain.chunking import chunk_text
from pipeline.ingest.settings import CONSUMER_BATCH_SIZE
from pipeline.settings import Settings
from tests.faults.faultutil import (
    PIPELINE,
    ProcSet,
    assert_graph_matches_postgres,
    dead_letters_mentioning,
    elapsed,
    graph_node_summary,
    link,
    long_content,
    ns_counts,
    pg_edges,
    publish_fast,
    rows,
    scalar,
    wait_converged,
)
from tests.faults.oracle import (
    check_against_postgres,
    expected_from_log,
    expected_from_published,
)
from tests.faults.workload import mixed_events
from tests.pipelineutil import put, wait_for
from tests.stackutil import REPO

pytestmark = [pytest.mark.stack, pytest.mark.slow]
log = logging.getLogger(__name__)

# The mixed workload's links may overtake their endpoints' puts (other partitions): they wait.
PROC_ENV = {"BRAINSTREAM_DEFER_SECONDS": "600"}


def _puts(ns: uuid.UUID, count: int, *, every_content: int, chunk_max: int, overlap: int,
          label: str) -> tuple[list[tuple[dict[str, Any], str]], dict[str, int]]:
    """`count` company puts; every `every_content`-th has content that chunks into parts."""
    events: list[tuple[dict[str, Any], str]] = []
    parts: dict[str, int] = {}
    for i in range(count):
        if i % every_content == 0:
            content = long_content(f"{label}{i}")
            event = put(ns, kind="company", title=f"{label} {i}", content=content)
            parts[event["data"]["id"]] = len(chunk_text(content, max_tokens=chunk_max,
                                                        overlap_tokens=overlap))
        else:
            event = put(ns, kind="company", title=f"{label} {i}",
                        properties={"industry": f"i{i % 7}"})
        events.append((event, event["data"]["id"]))
    return events, parts


def test_consumer_kill9_mid_batch_applies_every_event_exactly_once(
        pipeline_procs: ProcSet) -> None:
    procs = pipeline_procs
    settings = procs.settings
    ns = uuid.uuid4()
    total = 1500
    events, parts = _puts(ns, total, every_content=5, chunk_max=settings.chunk_max_tokens,
                          overlap=settings.chunk_overlap_tokens, label="crash")
    assert min(parts.values()) >= 2, "the content must chunk into several parts"
    started = time.monotonic()
    publish_fast(settings, events)

    def landed() -> int:
        return int(scalar(settings, "SELECT count(*) FROM objects WHERE namespace_id = %s"
                          " AND parent_id IS NULL", ns))

    at_kill = wait_for(lambda: (n := landed()) >= 300 and n, timeout=60, interval=0.02,
                       what="the first few hundred rows")
    procs.kill9("consumer")
    after_kill = landed()
    # Otherwise the kill did not interrupt the stream and the test proves nothing.
    assert after_kill < total, f"the consumer had already applied all {total} events"
    procs.start("consumer")

    wait_for(lambda: landed() == total and int(scalar(
        settings, "SELECT count(*) FROM processed_events WHERE namespace_id = %s", ns)) == total,
        timeout=90, interval=0.5, what="every event applied after the restart")
    # Replays after the restart come before later offsets of each partition, so once every
    # event is in, any replayed duplicate was already consumed; give stragglers a moment.
    time.sleep(1.0)
    procs.assert_alive("consumer")

    assert rows(settings, "SELECT count(*), count(DISTINCT id) FROM objects"
                " WHERE namespace_id = %s AND parent_id IS NULL", ns) == [(total, total)]
    assert rows(settings, "SELECT outcome, count(*) FROM processed_events"
                " WHERE namespace_id = %s GROUP BY outcome", ns) == [("applied", total)]
    found_parts = {str(parent): (n, positions) for parent, n, positions in rows(
        settings, "SELECT parent_id, count(*), array_agg(position ORDER BY position)"
        " FROM objects WHERE namespace_id = %s AND parent_id IS NOT NULL GROUP BY parent_id",
        ns)}
    assert set(found_parts) == set(parts)
    for parent, expected in parts.items():
        count, positions = found_parts[parent]
        assert (count, positions) == (expected, list(range(expected))), parent
    # One node per object in the graph, edges none, once the workers caught up.
    wait_converged(settings, ns, objects=total, timeout=90, procs=procs)
    assert_graph_matches_postgres(settings, ns)
    assert dead_letters_mentioning(settings, [str(ns)]) == []
    check_against_postgres(settings, ns, expected_from_published(ns, [e for e, _ in events]),
                           procs=procs)
    replayed = sum(int(n) for n in re.findall(r"(\d+) duplicates",
                                              procs.log_since_start("consumer")))
    log.info("consumer crash: killed at %d/%d rows (%d after kill), %d replayed events were "
             "no-ops, converged in %.1fs", at_kill, total, after_kill, replayed,
             elapsed(started))


def _consumer_in_transaction(settings: Settings) -> bool:
    """Whether the consumer's connection holds an open transaction: a batch is being applied."""
    return bool(scalar(settings, "SELECT count(*) FROM pg_stat_activity"
                       " WHERE application_name = 'brainstream-consumer'"
                       " AND xact_start IS NOT NULL"))


def test_consumer_kill9_mid_bulk_burst_keeps_key_order_and_applies_once(
        pipeline_procs: ProcSet) -> None:
    """A consumer far behind takes large batches (runs of puts through set-based statements,
    pipeline/ingest/bulk.py); killed while one is in flight after others committed, its
    successor re-applies what was not acknowledged, and the oracle finds every event of the
    mixed workload (re-puts, deletes, revivals, stale versions, links, poison) applied once, in
    each key's order."""
    procs = pipeline_procs
    settings = procs.settings
    ns = uuid.uuid4()
    events = mixed_events(ns, 1000, seed=3, label="bulk")  # about 3,000 events
    expected = expected_from_published(ns, [e for e, _ in events])
    procs.stop("consumer")  # the burst is all waiting when the consumer starts: it is behind
    publish_fast(settings, events)
    procs.start("consumer")

    def ledger() -> int:
        return int(scalar(settings, "SELECT count(*) FROM processed_events"
                          " WHERE namespace_id = %s", ns))

    def sizes() -> list[int]:
        return [int(n) for n in re.findall(r"batch: (\d+) records",
                                           procs.log_since_start("consumer"))]

    # the first batches are small (the fetches ramp up), then they grow: kill once a large one
    # committed and the next is in flight
    at_kill = wait_for(lambda: max(sizes(), default=0) > CONSUMER_BATCH_SIZE
                       and _consumer_in_transaction(settings) and ledger(), timeout=120,
                       interval=0.01, what="a large batch committed and the next one in flight")
    procs.kill9("consumer")
    before = sizes()
    assert ledger() < len(expected.outcomes), "the consumer had applied everything"
    procs.start("consumer")

    log_view = expected_from_log(settings, ns)
    assert (log_view.outcomes, log_view.dead) == (expected.outcomes, expected.dead)
    check_against_postgres(settings, ns, expected, procs=procs, timeout=240)
    procs.assert_alive("consumer")
    replayed = sum(int(n) for n in re.findall(r"(\d+) duplicates",
                                              procs.log_since_start("consumer")))
    log.info("bulk burst crash: %d events, batches before the kill %s, killed at %d in the "
             "ledger, %d replayed events were no-ops", len(events), before, at_kill, replayed)


def test_worker_and_relay_kill9_mid_work_converge(pipeline_procs: ProcSet) -> None:
    procs = pipeline_procs
    settings = procs.settings
    ns = uuid.uuid4()
    count = 400
    # let the backlog build up first (extraction too: its outbox rows would join the backlog)
    procs.stop("worker", "extract", "relay")
    events, parts = _puts(ns, count, every_content=4, chunk_max=settings.chunk_max_tokens,
                          overlap=settings.chunk_overlap_tokens, label="work")
    ids = [key for _, key in events]
    links = [(link(ns, ids[i], ids[(i * 7 + 3) % count], rel, f"note {i}"), ids[i])
             for i in range(0, count, 2) for rel in ("partner", "supplier")]
    publish_fast(settings, events)
    # Links only once both endpoints are in (their partitions are consumed independently).
    wait_for(lambda: ns_counts(settings, ns)["first_class"] == count, timeout=60,
             what="every object in Postgres")
    publish_fast(settings, links)
    wait_for(lambda: len(pg_edges(settings, ns)) == len(links), timeout=60,
             what="every object and link in Postgres")
    before = ns_counts(settings, ns)
    assert before["first_class"] == count
    assert before["parts"] == sum(parts.values())
    assert before["pending"] == before["objects"] and before["backlog"] == count + len(links)

    # The relay first, in small rounds so the kill lands inside one (graph half-written):
    # it projects the vector-less nodes and the edges, and dies part-way.
    procs.start("relay", env={"BRAINSTREAM_RELAY_BATCH_SIZE": "10"})
    relay_at_kill = wait_for(lambda: (c := ns_counts(settings, ns))["backlog"]
                             <= before["backlog"] - 30 and c, timeout=60, interval=0.02,
                             what="the relay to be under way")
    procs.kill9("relay")
    # Then the embedding worker, killed part-way too (claimed rows keep a lease until it ends).
    procs.start("worker")
    worker_at_kill = wait_for(lambda: (c := ns_counts(settings, ns))["done"] >= 50 and c,
                              timeout=60, interval=0.02, what="the worker to be under way")
    procs.kill9("worker")
    killed = ns_counts(settings, ns)
    assert killed["pending"] > 0, f"the worker had finished before the kill: {killed}"
    assert killed["backlog"] > 0, f"the relay had finished before the kill: {killed}"
    assert graph_node_summary(settings, ns), "the relay had projected nothing"
    procs.start("worker", "extract", "relay")

    converged = wait_converged(settings, ns, objects=count, timeout=90, procs=procs)
    assert converged["failed"] == 0
    assert converged["done"] == converged["objects"] == count + sum(parts.values())
    assert rows(settings, "SELECT count(*) FROM objects o JOIN object_embeddings e"
                " ON e.id = o.id WHERE o.namespace_id = %s AND (e.embedding IS NULL"
                " OR e.embedded_hash IS DISTINCT FROM o.index_text_hash)", ns) == [(0,)]
    assert_graph_matches_postgres(settings, ns)
    assert len(pg_edges(settings, ns)) == len(links)
    check_against_postgres(settings, ns, expected_from_published(
        ns, [e for e, _ in events + links]), procs=procs)
    procs.assert_alive(*PIPELINE)
    log.info("worker crash: relay killed at %s, worker at %s, converged %s", relay_at_kill,
             worker_at_kill, converged)


ROUNDS = 12
_PRODUCER_CHILD = """
import sys
from pipeline.kafka.io import make_producer
from pipeline.settings import load_settings
settings = load_settings()
producer = make_producer(settings)
producer.send(settings.topic_changes, key=b"probe", value=b"first").get(timeout=30)
print("ready", flush=True)
i = 0
while True:
    producer.send(settings.topic_changes, key=str(i % 7).encode(), value=b"x" * 100)
    i += 1
    if i % 50 == 0:
        producer.flush()
"""


def test_pipeline_producer_works_after_a_producer_was_killed(fault_catalog: Settings) -> None:
    """Regression: kafka-python 3 producers are idempotent by default, and on the embedded
    broker a new idempotent producer often fails InitProducerId for good after another producer
    was killed (UnknownProducerId / OutOfOrderSequenceNumber, then UnknownError: fatal). The
    restarted relay then never published a change again and the outbox never drained. The
    pipeline's producers must be plain at-least-once ones (pipeline/kafka/io.make_producer)."""
    from pipeline.kafka.io import make_producer
    from pipeline.kafka.topics import ensure_topics
    from tests.stackutil import settings_env

    probe = fault_catalog.model_copy(update={"topic_changes": "brainstream.faults.probe"})
    ensure_topics(probe)
    env = {**settings_env(probe), "BRAINSTREAM_TOPIC_CHANGES": probe.topic_changes}
    started = time.monotonic()
    for attempt in range(ROUNDS):  # an idempotent producer failed in about 1 of 4 rounds
        child = subprocess.Popen([sys.executable, "-c", _PRODUCER_CHILD], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 cwd=str(REPO))
        try:
            assert child.stdout is not None and child.stdout.readline() == b"ready\n"
            time.sleep(0.5)
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        producer = make_producer(probe)
        try:
            for i in range(10):
                try:
                    producer.send(probe.topic_changes, key=str(i).encode(),
                                  value=b"after").get(timeout=10)
                except KafkaError as exc:
                    pytest.fail(f"round {attempt}: a new pipeline producer cannot send after "
                                f"its predecessor was killed: {exc!r}")
        finally:
            with contextlib.suppress(KafkaError):
                producer.close(timeout=5)
    log.info("producer restarts: %d rounds fine in %.1fs", ROUNDS, elapsed(started))
