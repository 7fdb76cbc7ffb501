"""Two consumers of one group share the input topic's partitions: per-key order holds and every
event is applied once, also when one of them is killed and the other takes its partitions over.

The module's consumer and a second `brainstream consumer` ("consumer2", its own metrics port)
join one consumer group on the shared stack's 4-partition input topic (tests/stackutil). The
workload is the fault suite's mixed one (versioned puts, re-puts, soft deletes, revivals, stale
versions, links, poison) interleaved with objects that get several unversioned puts: without a
version each put applies, so only the order of application decides which title stays. The oracle
(tests/faults/oracle.py) then demands the state the log implies. Who owned which partitions, and
that both did work, comes from the consumers' logs: faust logs every assignment, the consumer
every batch.

In the fault suite (slow) because the group must hold these two consumers only: the fast suite's
session consumer (tests/conftest.py `procs`) joins the same group and runs until the session
ends, while the fault modules run first, one module's processes at a time.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from typing import Any

import pytest

from pipeline.settings import Settings
from tests.faults.faultutil import ProcSet, elapsed, publish_fast, rows, scalar
from tests.faults.oracle import check_published, read_log, summary
from tests.faults.workload import (
    BackgroundPublisher,
    Event,
    interleave,
    mixed_events,
    sequenced_puts,
)
from tests.pipelineutil import wait_for

pytestmark = [pytest.mark.stack, pytest.mark.slow]
log = logging.getLogger(__name__)

# Links may overtake their endpoints' puts (other partitions, maybe the other consumer): they
# wait instead of being dead-lettered.
PROC_ENV = {"BRAINSTREAM_DEFER_SECONDS": "600"}
CONSUMERS = ("consumer", "consumer2")
SECOND = {"BRAINSTREAM_CONSUMER_METRICS_PORT": "0"}  # the first one holds the test port
OBJECTS = 300  # about 900 mixed events
SEQ_KEYS, SEQ_ROUNDS = 100, 5  # and 500 unversioned puts

# aiokafka's "Setting newly assigned partitions" line, which faust renders as a table
ASSIGNED = re.compile(r"Setting newly assigned partitions(.*?)for group", re.S)
BATCH = re.compile(r"batch: \d+ records, (\d+) applied, (\d+) duplicates")


def assignments(text: str, topic: str) -> list[set[int]]:
    """Every assignment of `topic`'s partitions a consumer logged in `text`, in order."""
    out = []
    for table in ASSIGNED.findall(text):
        row = re.search(rf"\|\s*{re.escape(topic)}\s*\|\s*\{{([^}}]*)\}}", table)
        out.append(_partition_set(row.group(1)) if row else set())
    return out


def _partition_set(spec: str) -> set[int]:
    """faust's rendering of a partition set ("0-1, 3") as a set."""
    out: set[int] = set()
    for item in spec.split(","):
        low, _, high = item.strip().partition("-")
        out.update(range(int(low), int(high or low) + 1))
    return out


def batch_counts(text: str) -> tuple[int, int]:
    """(applied, duplicates) over the batches a consumer logged in `text`."""
    found = BATCH.findall(text)
    return sum(int(a) for a, _ in found), sum(int(d) for _, d in found)


def start_second(procs: ProcSet) -> dict[str, set[int]]:
    """Start consumer2 and wait until the two consumers split the partitions between them;
    who owns what."""
    settings = procs.settings
    every = set(range(settings.topic_partitions))
    mark = procs.log_mark("consumer")
    procs.start("consumer2", env=SECOND)

    def split() -> dict[str, set[int]] | None:
        procs.assert_alive(*CONSUMERS)
        owned = {"consumer": (assignments(procs.log_since("consumer", mark),
                                          settings.topic_events) or [set()])[-1],
                 "consumer2": (assignments(procs.log_since_start("consumer2"),
                                           settings.topic_events) or [set()])[-1]}
        if all(owned.values()) and sum(len(p) for p in owned.values()) == len(every) \
                and set().union(*owned.values()) == every:
            return owned
        return None

    return wait_for(split, timeout=90, interval=0.5,
                    what=f"two consumers sharing {sorted(every)} (logs in {procs.log_dir})")


def workload(ns: uuid.UUID, seed: int, label: str) -> tuple[list[Event], dict[str, str]]:
    """The mixed events and the sequenced puts interleaved; each sequenced object's last
    title."""
    sequenced, last = sequenced_puts(ns, SEQ_KEYS, SEQ_ROUNDS, label=f"{label}-seq")
    return interleave(mixed_events(ns, OBJECTS, seed=seed, label=label), sequenced,
                      seed=seed), last


def assert_last_titles(settings: Settings, ns: uuid.UUID, last: dict[str, str]) -> None:
    """Each sequenced object shows the title of its last put: its events applied in order."""
    found = dict(rows(settings, "SELECT id::text, title FROM objects WHERE id = ANY(%s::uuid[])"
                      " AND namespace_id = %s", list(last), ns))
    wrong = {oid: (found.get(oid), want) for oid, want in last.items() if found.get(oid) != want}
    assert not wrong, (f"{len(wrong)} of {len(last)} objects kept an earlier put's title "
                       f"(events applied out of order), e.g. {list(wrong.items())[:3]}")


def _ledger(settings: Settings, ns: uuid.UUID) -> int:
    return int(scalar(settings, "SELECT count(*) FROM processed_events WHERE namespace_id = %s",
                      ns))


def _holding(settings: Settings, ns: uuid.UUID) -> dict[int, int]:
    """partition -> how many records of `ns` the input topic holds there."""
    out: dict[int, int] = {}
    for partition, _, value in read_log(settings):
        try:
            mine = json.loads(value).get("namespace") == str(ns)
        except (ValueError, AttributeError):
            continue
        if mine:
            out[partition] = out.get(partition, 0) + 1
    return out


def test_two_consumers_share_the_partitions_in_order_and_once(pipeline_procs: ProcSet) -> None:
    procs = pipeline_procs
    settings = procs.settings
    owned = start_second(procs)
    marks = {name: procs.log_mark(name) for name in CONSUMERS}
    ns = uuid.uuid4()
    events, last = workload(ns, seed=5, label="two")
    started = time.monotonic()
    publish_fast(settings, events)

    expected = check_published(procs, ns, events)
    assert_last_titles(settings, ns, last)
    procs.assert_alive(*CONSUMERS)
    holding = _holding(settings, ns)
    work: dict[str, Any] = {}
    for name in CONSUMERS:
        text = procs.log_since(name, marks[name])
        applied, duplicates = batch_counts(text)
        held = sum(holding.get(p, 0) for p in owned[name])
        # Each owned partitions holding part of the workload and applied events of it.
        assert held > 0 and applied > 0, (
            f"{name} owned partitions {sorted(owned[name])} holding {held} records of the "
            f"workload and applied {applied} events (log in {procs.log_dir})")
        work[name] = {"partitions": sorted(owned[name]), "records": held, "applied": applied,
                      "duplicates": duplicates,
                      "rebalances": len(assignments(text, settings.topic_events))}
    log.info("two consumers: %s; %s; converged in %.1fs", work, summary(expected),
             elapsed(started))


def test_the_other_consumer_takes_over_after_kill9_in_order_and_once(
        pipeline_procs: ProcSet) -> None:
    procs = pipeline_procs
    settings = procs.settings
    every = set(range(settings.topic_partitions))
    owned = start_second(procs)
    second_mark = procs.log_mark("consumer2")
    ns = uuid.uuid4()
    events, last = workload(ns, seed=6, label="take")
    started = time.monotonic()
    publisher = BackgroundPublisher(settings, events).start()

    def both_under_way() -> bool:
        procs.assert_alive(*CONSUMERS)
        return (batch_counts(procs.log_since("consumer2", second_mark))[0] > 0
                and _ledger(settings, ns) >= 300)

    wait_for(both_under_way, timeout=90, interval=0.05,
             what="consumer2 applying events of the workload")
    first_mark = procs.log_mark("consumer")
    procs.kill9("consumer2")
    at_kill = _ledger(settings, ns)
    killed_at = time.monotonic()
    # Otherwise the kill did not interrupt the stream and the test proves nothing.
    assert at_kill < len(events), f"the consumers had already applied all {len(events)} events"

    def took_over() -> bool:
        procs.assert_alive("consumer")
        return every in assignments(procs.log_since("consumer", first_mark),
                                    settings.topic_events)

    wait_for(took_over, timeout=90, interval=0.5,
             what=f"the consumer to take over consumer2's partitions {sorted(owned['consumer2'])}"
                  f" (logs in {procs.log_dir})")
    takeover = time.monotonic() - killed_at
    publisher.wait(timeout=180)

    expected = check_published(procs, ns, events)
    assert_last_titles(settings, ns, last)
    applied, duplicates = batch_counts(procs.log_since("consumer", first_mark))
    assert applied > 0, "the consumer applied nothing after the takeover"
    log.info("takeover: consumer2 owned %s and was killed at %d/%d ledger rows; the consumer "
             "held every partition %.1fs later and then applied %d events (%d replayed were "
             "no-ops); publisher retried %d chunks; %s; converged in %.1fs",
             sorted(owned["consumer2"]), at_kill, len(expected.outcomes) + len(expected.dead),
             takeover, applied, duplicates, publisher.retries, summary(expected),
             elapsed(started))
