"""Every record the embedded broker acknowledged can be read back: with several publishers on one
partition, and across SIGTERM and SIGKILL of the broker and of its S3 store at random moments.

Each cycle publishes to a fresh topic from four acks=all publishers, injects its fault, publishes
on, reads every partition from the start and diffs against the acknowledged set
(bench/broker/durability.py, which also prints the figures). The long run (20 SIGTERMs and 20
SIGKILLs of the broker) is in the slow suite.
"""

from __future__ import annotations

import logging
import random

import pytest

from bench.broker.durability import CycleResult, OwnBroker, run_cycle, summary

log = logging.getLogger(__name__)


def _cycles(own: OwnBroker, faults: list[str], cycles: int, seed: int, *, first: int = 0
            ) -> list[CycleResult]:
    """`cycles` cycles of each fault; topics are named by cycle number from `first` (the module's
    broker is shared: two tests must not name the same topic)."""
    rng = random.Random(seed)
    results = []
    for cycle in range(first, first + cycles):
        for fault in faults:
            result = run_cycle(own, fault, cycle, publishers=4, partitions=4, rng=rng,
                               after=1.0)
            log.info("cycle %d %s", cycle, result.line())
            results.append(result)
    for line in summary(results):
        log.info("%s", line)
    return results


def _assert_nothing_lost(results: list[CycleResult]) -> None:
    assert all(r.acked > 0 for r in results), "a cycle published nothing"
    lost = [(r.fault, a) for r in results for a in r.lost]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:3]}"
    assert sum(r.reused for r in results) == 0, "an offset was acknowledged to two records"


def test_concurrent_publishers_on_one_partition_lose_nothing(own_broker: OwnBroker) -> None:
    """No fault at all: before the store honoured conditional writes this alone lost about a
    third of what four publishers had acknowledged."""
    _assert_nothing_lost(_cycles(own_broker, ["none"], 1, seed=1))


@pytest.mark.parametrize(("fault", "cycles"), [("broker-term", 1), ("broker-kill", 1),
                                               ("store-term", 1), ("store-kill", 1)])
def test_a_restart_at_a_random_moment_loses_nothing(own_broker: OwnBroker, fault: str,
                                                    cycles: int) -> None:
    _assert_nothing_lost(_cycles(own_broker, [fault], cycles, seed=sum(map(ord, fault))))


@pytest.mark.slow
def test_twenty_broker_restarts_and_twenty_kills_lose_nothing(own_broker: OwnBroker) -> None:
    _assert_nothing_lost(_cycles(own_broker, ["broker-term", "broker-kill"], 20, seed=20,
                                 first=100))
