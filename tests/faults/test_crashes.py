"""kill -9 of pipeline processes mid-work: nothing is lost, nothing is applied twice.

The consumer is killed while it applies a stream of puts (replayed offsets must be no-ops); the
embedding worker and the relay are killed while both have a backlog (leases expire, the sweep
re-triggers, the relay re-syncs idempotently).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import pytest

from pipeline.chunking import chunk_text
from tests.faults.faultutil import (
    PIPELINE,
    ProcSet,
    assert_graph_matches_postgres,
    dead_letters_mentioning,
    elapsed,
    link,
    long_content,
    ns_counts,
    pg_edges,
    publish_fast,
    rows,
    scalar,
    wait_converged,
)
from tests.pipelineutil import put, wait_for

pytestmark = [pytest.mark.stack, pytest.mark.slow]
log = logging.getLogger(__name__)


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
    log.info("consumer crash: killed at %d/%d rows (%d after kill), converged in %.1fs",
             at_kill, total, after_kill, elapsed(started))


def test_worker_and_relay_kill9_mid_work_converge(pipeline_procs: ProcSet) -> None:
    procs = pipeline_procs
    settings = procs.settings
    ns = uuid.uuid4()
    count = 400
    procs.stop("worker", "relay")  # let the backlog build up first
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

    procs.start("worker", "relay")
    # Mid-work: some rows embedded, some still pending, and some outbox rows applied.
    at_kill = wait_for(lambda: (c := ns_counts(settings, ns))["done"] >= 100
                       and c["backlog"] < before["backlog"] and c, timeout=60, interval=0.05,
                       what="the workers to be half-way")
    procs.kill9("worker", "relay")
    killed = ns_counts(settings, ns)
    assert killed["pending"] > 0, f"the worker had finished before the kill: {killed}"
    assert killed["backlog"] > 0, f"the relay had finished before the kill: {killed}"
    procs.start("worker", "relay")

    converged = wait_converged(settings, ns, objects=count, timeout=90, procs=procs)
    assert converged["failed"] == 0
    assert converged["done"] == converged["objects"] == count + sum(parts.values())
    assert rows(settings, "SELECT count(*) FROM objects WHERE namespace_id = %s"
                " AND (embedding IS NULL OR embedded_hash IS DISTINCT FROM index_text_hash)",
                ns) == [(0,)]
    assert_graph_matches_postgres(settings, ns)
    assert len(pg_edges(settings, ns)) == len(links)
    procs.assert_alive(*PIPELINE)
    log.info("worker crash: killed at %s, converged %s", at_kill, converged)
