"""A mixed event workload for the fault tests, and a publisher that keeps publishing through
broker outages.

The mix covers every event type: puts (a quarter with content that chunks into several parts),
re-puts with changed content (some with fewer parts), soft deletes, revivals, stale versions,
link puts, link re-puts with a changed note, link deletes and poison events. Every event about an
object or link carries an increasing `version`, so a publisher retry that reorders two events of
one aggregate still has one well-defined outcome (the older one is stale).

Cross-aggregate effects are kept out of the mix so the expected state can be computed per
aggregate from the log (tests/faults/oracle.py): objects that are soft-deleted are never link
endpoints, and the processes run with a long DEFER_SECONDS, so a link put that overtakes its
endpoint's put (another partition) waits instead of being dead-lettered.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipeline.domain.errors import Unavailable
from pipeline.kafka.io import make_producer
from pipeline.kafka.publisher import EventPublisher
from pipeline.settings import Settings
from tests.faults.faultutil import long_content
from tests.pipelineutil import envelope

log = logging.getLogger("tests.faults")

Event = tuple[dict[str, Any], str]  # (envelope, record key)


def _put(ns: uuid.UUID, oid: str, version: int, title: str, content: str | None = None
         ) -> dict[str, Any]:
    data: dict[str, Any] = {"id": oid, "kind": "company", "title": title}
    if content is not None:
        data["content"] = content
    else:
        data["properties"] = {"industry": f"v{version}"}
    return envelope("object.put", ns, data, version=version)


def _link(ns: uuid.UUID, a: str, rel: str, b: str, note: str, version: int,
          delete: bool = False) -> dict[str, Any]:
    if delete:
        return envelope("link.delete", ns, {"from": a, "to": b, "relation_type": rel},
                        version=version)
    return envelope("link.put", ns, {"from": a, "to": b, "relation_type": rel,
                                     "meta": {"note": note}}, version=version)


def mixed_events(ns: uuid.UUID, objects: int, *, seed: int = 0, label: str = "mix"
                 ) -> list[Event]:
    """About 3 x `objects` events of every type, in publishable order (per key, the order
    the versions say)."""
    rng = random.Random(seed)
    ids = [str(uuid.uuid4()) for _ in range(objects)]
    linkable = ids[: objects * 3 // 5]  # never deleted
    deletable = ids[objects * 3 // 5:]
    first: list[Event] = []
    second: list[Event] = []
    third: list[Event] = []
    last: list[Event] = []
    for i, oid in enumerate(ids):
        content = long_content(f"{label}{i}a", paragraphs=3) if i % 4 == 0 else None
        first.append((_put(ns, oid, 1, f"{label} {i}", content), oid))
        if i % 3 == 0:  # re-put: changed title, content that chunks differently (or none)
            content2 = long_content(f"{label}{i}b", paragraphs=2) if i % 2 == 0 else None
            second.append((_put(ns, oid, 2, f"{label} {i} v2", content2), oid))
        if i % 10 == 0:  # a late, older version: stale
            last.append((_put(ns, oid, 0, f"{label} {i} stale"), oid))
    for j, oid in enumerate(deletable):
        if j % 2 == 0:
            third.append((envelope("object.soft_delete", ns, {"id": oid}, version=3), oid))
            if j % 6 == 0:  # revived with new content
                last.append((_put(ns, oid, 4, f"{label} revived {j}",
                                  long_content(f"{label}{j}r", paragraphs=2)), oid))
    n = len(linkable)
    for i, a in enumerate(linkable):
        for rel, step in (("partner", 1), ("supplier", 7)):
            b = linkable[(i + step) % n]
            second.append((_link(ns, a, rel, b, f"{rel} {i}", 1), a))
            if i % 4 == 0:
                third.append((_link(ns, a, rel, b, f"{rel} {i} renewed", 2), a))
            if i % 5 == 1:
                last.append((_link(ns, a, rel, b, "", 3, delete=True), a))
    for k in range(max(2, objects // 100)):  # poison: dead-lettered with their reason
        bad = envelope("object.put", ns, {"id": str(uuid.uuid4()), "kind": "no_such_kind",
                                          "title": f"poison {k}"})
        last.append((bad, bad["data"]["id"]))
        gone = str(uuid.uuid4())
        last.append((envelope("object.soft_delete", ns, {"id": gone}, version=1), gone))
    # Shuffle within each phase (keys differ) but keep phases in order: one aggregate's
    # events stay in version order, and every type is in flight at any moment.
    out: list[Event] = []
    for phase in (first, second, third, last):
        rng.shuffle(phase)
        out += phase
    return _keep_key_order(out)


def _keep_key_order(events: list[Event]) -> list[Event]:
    """Within each key, put the events back in the order of their versions (a phase shuffle
    may have swapped a link re-put and its delete, both in one phase)."""
    by_key: dict[str, list[Event]] = {}
    for event in events:
        by_key.setdefault(event[1], []).append(event)
    for seq in by_key.values():
        seq.sort(key=lambda e: (_phase_rank(e[0]), int(e[0].get("version", 99))))
    cursor = {k: 0 for k in by_key}
    out = []
    for _, key in events:
        out.append(by_key[key][cursor[key]])
        cursor[key] += 1
    return out


def _phase_rank(event: dict[str, Any]) -> int:
    # a stale version-0 put is published last on purpose: keep it last
    return 1 if event.get("version") == 0 else 0


def sequenced_puts(ns: uuid.UUID, keys: int, rounds: int, *, label: str = "seq"
                   ) -> tuple[list[Event], dict[str, str]]:
    """`rounds` unversioned puts of each of `keys` objects, round by round, and each object's
    last title. Without a version every put applies, so only the order in which a key's
    events are applied decides which title stays: the last one published, if order held."""
    ids = [str(uuid.uuid4()) for _ in range(keys)]
    events = [(envelope("object.put", ns, {"id": oid, "kind": "company",
                                           "title": f"{label} {k} #{r}"}), oid)
              for r in range(rounds) for k, oid in enumerate(ids)]
    return events, {oid: f"{label} {k} #{rounds - 1}" for k, oid in enumerate(ids)}


def interleave(first: list[Event], second: list[Event], *, seed: int = 0) -> list[Event]:
    """Both lists merged at random, each one's own order kept (so every key's order)."""
    rng = random.Random(seed)
    out: list[Event] = []
    i = j = 0
    while i < len(first) or j < len(second):
        left = len(first) - i
        if j == len(second) or (left and rng.random() < left / (left + len(second) - j)):
            out.append(first[i])
            i += 1
        else:
            out.append(second[j])
            j += 1
    return out


@dataclass
class BackgroundPublisher:
    """Publishes events in chunks from a thread, as a careful upstream publisher would: a chunk
    whose flush fails (`Unavailable`) is sent again, whole, until the broker acknowledged it
    (at-least-once; the consumer's ledger makes the duplicates no-ops)."""

    settings: Settings
    events: list[Event]
    chunk: int = 50
    pause: float = 0.25  # spreads ~2,000 events over ~15 s: faults land mid-stream
    acked: int = 0
    retries: int = 0
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> BackgroundPublisher:
        self._thread = threading.Thread(target=self._run, name="fault-publisher", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        producer = make_producer(self.settings, request_timeout_ms=10_000, max_block_ms=10_000)
        publisher = EventPublisher(producer, self.settings.topic_events)
        try:
            for start in range(0, len(self.events), self.chunk):
                part = self.events[start:start + self.chunk]
                _until_acked(publisher, part, self._retried)
                self.acked += len(part)
                time.sleep(self.pause)
        except BaseException as exc:  # reported by wait()
            self.error = exc
        finally:
            self.done.set()
            producer.close(timeout=5)

    def _retried(self, exc: Exception) -> None:
        self.retries += 1
        log.info("publisher: chunk not acknowledged (%s); sending it again", exc)

    def wait(self, timeout: float = 180.0) -> None:
        assert self.done.wait(timeout), f"publisher still busy after {timeout:.0f}s " \
                                        f"({self.acked}/{len(self.events)} acknowledged)"
        if self.error is not None:
            raise AssertionError(f"publisher failed: {self.error!r}") from self.error


def _until_acked(publisher: EventPublisher, part: list[Event],
                 on_retry: Callable[[Exception], None], deadline: float = 120.0) -> None:
    import json

    from kafka.errors import KafkaError

    give_up = time.monotonic() + deadline
    while True:
        try:
            for event, key in part:
                publisher.send(json.dumps(event).encode(), key.encode())
            publisher.flush(timeout=15)
            return
        except (Unavailable, KafkaError) as exc:
            if time.monotonic() > give_up:
                raise
            on_retry(exc)
            time.sleep(0.5)
