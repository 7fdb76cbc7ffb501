"""The fault suite's oracle: the state the event log implies, compared with what the pipeline made.

`expected_from_log` reads the input topic back (what the broker really holds, duplicates from
publisher retries included), keeps one namespace's records, and replays them per partition in
offset order with the product's rules: the first copy of an event id counts, an older `version`
is stale, a soft delete of an unknown object and a delete of an unknown link are dead letters,
a put of an unknown kind is a dead letter. The workload (tests/faults/workload.py) keeps
aggregates independent across partitions, so per-partition order is all the replay needs.

`check_against_postgres` then demands, once the pipeline has converged: the visible objects,
titles, contents and parts are exactly the expected ones, so are the visible links and their
notes; no row, part or edge is duplicated; every event of the namespace is in the processed
ledger exactly once with its expected outcome, or on the DLQ with its expected reason (never
both); the graph matches Postgres; and `brainstream verify` exits 0.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from pipeline.domain.chunking import chunk_text
from pipeline.kafka.io import H_EVENT_ID
from pipeline.ops.dlq import read_all
from pipeline.settings import Settings
from tests.faults.faultutil import (
    ProcSet,
    assert_graph_matches_postgres,
    graph_rows,
    rows,
    scalar,
    wait_converged,
)
from tests.pipelineutil import wait_for
from tests.stackutil import REPO, settings_env

KNOWN_KINDS = {"company", "deal", "note"}


@dataclass
class ObjectState:
    version: int | None
    deleted: bool
    title: str
    content: str | None


@dataclass
class Expected:
    """What the log implies for one namespace."""

    objects: dict[str, ObjectState] = field(default_factory=dict)
    links: dict[tuple[str, str, str], tuple[int | None, bool, str | None]] = \
        field(default_factory=dict)  # key -> (version, deleted, note)
    outcomes: dict[str, str] = field(default_factory=dict)  # event id -> applied | stale
    dead: dict[str, str] = field(default_factory=dict)  # event id -> error code
    records: int = 0  # records of the namespace in the log (duplicates included)

    @property
    def visible(self) -> dict[str, ObjectState]:
        return {k: v for k, v in self.objects.items() if not v.deleted}

    @property
    def visible_links(self) -> dict[tuple[str, str, str], str | None]:
        return {k: note for k, (_, deleted, note) in self.links.items() if not deleted}


def read_log(settings: Settings, *, idle_ms: int = 3000) -> list[tuple[int, int, bytes]]:
    """Every record of the input topic: (partition, offset, value), per partition in order.

    Partitions are assigned and read from offset 0: a subscribing reader (auto_offset_reset
    "earliest") sometimes began past the first batches of a partition after a broker restart
    and so "lost" records that were there (the consumer group, resuming from its commits, is
    not affected).
    """
    consumer = KafkaConsumer(bootstrap_servers=settings.effective_kafka_bootstrap,
                             auto_offset_reset="earliest", group_id=None,
                             consumer_timeout_ms=idle_ms, enable_auto_commit=False,
                             max_partition_fetch_bytes=8 * 1024 * 1024)
    try:
        tps = [TopicPartition(settings.topic_events, p) for p in
               sorted(consumer.partitions_for_topic(settings.topic_events) or [])]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        return [(m.partition, m.offset, m.value) for m in consumer]
    finally:
        consumer.close()


def expected_from_log(settings: Settings, ns: uuid.UUID) -> Expected:
    """Replay the namespace's records as the product's rules say (see the module doc)."""
    return expected_from_values(ns, (value for _, _, value in sorted(read_log(settings))))


def expected_from_published(ns: uuid.UUID, events: Iterable[dict[str, Any]]) -> Expected:
    """The same, from what a publisher had acknowledged, in its order (one producer with one
    request in flight keeps each key's order; a chunk sent again only adds duplicates)."""
    return expected_from_values(ns, (json.dumps(e).encode() for e in events))


def expected_from_values(ns: uuid.UUID, values: Iterable[bytes]) -> Expected:
    out = Expected()
    seen: set[str] = set()
    for value in values:
        try:
            event = json.loads(value)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("namespace") != str(ns):
            continue
        out.records += 1
        event_id = str(event["id"])
        if event_id in seen:
            continue  # a duplicate: the ledger makes it a no-op
        seen.add(event_id)
        result = _apply(out, event)
        if result.startswith("dead:"):
            out.dead[event_id] = result[5:]
        else:
            out.outcomes[event_id] = result
    return out


def missing_from_log(settings: Settings, events: Iterable[dict[str, Any]]) -> list[str]:
    """Ids of acknowledged events the input topic does not hold (the broker lost them)."""
    held: set[str] = set()
    for _, _, value in read_log(settings):
        try:
            held.add(str(json.loads(value)["id"]))
        except (ValueError, KeyError, TypeError):
            continue
    return [str(e["id"]) for e in events if str(e["id"]) not in held]


def _stale(current: int | None, version: int | None) -> bool:
    return version is not None and current is not None and version < current


def _apply(out: Expected, event: dict[str, Any]) -> str:
    kind = event["type"].removeprefix("brainstream.")
    data = event["data"]
    version = event.get("version")
    if kind == "object.put":
        if data.get("kind") not in KNOWN_KINDS:
            return "dead:unknown_kind"
        head = out.objects.get(data["id"])
        if head is not None and _stale(head.version, version):
            return "stale"
        out.objects[data["id"]] = ObjectState(version, False, data["title"],
                                              data.get("content"))
        return "applied"
    if kind == "object.soft_delete":
        head = out.objects.get(data["id"])
        if head is None:
            return "dead:object_not_found"
        if _stale(head.version, version):
            return "stale"
        head.deleted = True
        head.version = version if version is not None else head.version
        return "applied"
    key = (data["from"], data["relation_type"], data["to"])
    link = out.links.get(key)
    if kind == "link.put":
        if link is not None and _stale(link[0], version):
            return "stale"
        out.links[key] = (version, False, (data.get("meta") or {}).get("note"))
        return "applied"
    if link is None:
        return "dead:link_not_found"
    if _stale(link[0], version):
        return "stale"
    out.links[key] = (version if version is not None else link[0], True, link[2])
    return "applied"


def wait_all_processed(settings: Settings, ns: uuid.UUID, expected: Expected, *,
                       timeout: float, procs: ProcSet | None = None) -> None:
    """Until every event of the namespace is in the ledger and nothing waits deferred."""
    want = len(expected.outcomes)

    def done() -> bool:
        if procs is not None:
            procs.check_producers()
        have = int(scalar(settings, "SELECT count(*) FROM processed_events"
                          " WHERE namespace_id = %s", ns))
        waiting = int(scalar(settings, "SELECT count(*) FROM deferred_events"
                             " WHERE namespace_id = %s", ns))
        return have >= want and not waiting

    wait_for(done, timeout=timeout, interval=0.5,
             what=f"{want} events of {ns} in the processed ledger")


def dead_letter_codes(settings: Settings) -> dict[str, list[str]]:
    """event id -> the error codes of its dead letters (a replayed batch may repeat one)."""
    out: dict[str, list[str]] = {}
    for letter in read_all(settings):
        event_id = letter.header(H_EVENT_ID)
        if event_id is not None:
            out.setdefault(event_id, []).append(letter.code)
    return out


def check_against_postgres(settings: Settings, ns: uuid.UUID, expected: Expected,
                           *, procs: ProcSet | None = None, timeout: float = 120.0) -> None:
    """Every assertion of the module doc; waits for convergence first."""
    wait_all_processed(settings, ns, expected, timeout=timeout, procs=procs)
    wait_converged(settings, ns, objects=len(expected.visible), timeout=timeout, procs=procs)
    _check_ledger(settings, ns, expected)
    _check_objects(settings, ns, expected)
    _check_links(settings, ns, expected)
    assert_graph_matches_postgres(settings, ns)
    assert_verify_clean(settings)


def check_published(procs: ProcSet, ns: uuid.UUID, events: list[tuple[dict[str, Any], str]],
                    *, timeout: float = 180.0) -> Expected:
    """The oracle on what a publisher had acknowledged (events with their keys): nothing
    acknowledged is missing from the log, the log implies the publisher's outcomes, and
    `check_against_postgres` holds."""
    settings = procs.settings
    published = [event for event, _ in events]
    lost = missing_from_log(settings, published)
    assert not lost, (f"the broker lost {len(lost)} acknowledged records, e.g. {lost[:2]} "
                      "(bench/broker/durability.py finds where)")
    expected = expected_from_published(ns, published)
    log_view = expected_from_log(settings, ns)
    assert (log_view.outcomes, log_view.dead) == (expected.outcomes, expected.dead), \
        "the log implies another outcome than the publisher's order"
    check_against_postgres(settings, ns, expected, procs=procs, timeout=timeout)
    return expected


def _check_ledger(settings: Settings, ns: uuid.UUID, expected: Expected) -> None:
    ledger = dict(rows(settings, "SELECT event_id, outcome FROM processed_events"
                       " WHERE namespace_id = %s", ns))
    assert set(ledger) == set(expected.outcomes), (
        f"ledger vs log: {len(set(expected.outcomes) - set(ledger))} events never applied, "
        f"{len(set(ledger) - set(expected.outcomes))} applied that the log does not explain")
    wrong = {k: (ledger[k], v) for k, v in expected.outcomes.items() if ledger[k] != v}
    assert not wrong, f"{len(wrong)} events with another outcome: {list(wrong.items())[:5]}"
    letters = dead_letter_codes(settings)
    for event_id, code in expected.dead.items():
        codes = letters.get(event_id)
        assert codes, f"event {event_id} should be dead-lettered ({code}) but is not on the DLQ"
        assert set(codes) == {code}, f"event {event_id}: dead letters {codes}, expected {code}"
    both = set(ledger) & set(letters)
    assert not both, f"{len(both)} events both applied and dead-lettered: {sorted(both)[:5]}"


def _check_objects(settings: Settings, ns: uuid.UUID, expected: Expected) -> None:
    found = {str(i): (title, content, deleted) for i, title, content, deleted in rows(
        settings, "SELECT id, title, content, deleted_at IS NOT NULL FROM objects"
        " WHERE namespace_id = %s AND parent_id IS NULL", ns)}
    assert set(found) == set(expected.objects), (
        f"objects vs log: {len(set(expected.objects) - set(found))} missing, "
        f"{len(set(found) - set(expected.objects))} unexpected")
    bad = [oid for oid, want in expected.objects.items()
           if found[oid] != (want.title, want.content, want.deleted)]
    assert not bad, f"{len(bad)} objects differ from the log, e.g. {bad[0]}: " \
                    f"{found[bad[0]][0]!r} vs {expected.objects[bad[0]]}"
    parts: dict[str, list[int]] = {}
    for parent, position in rows(
            settings, "SELECT parent_id, position FROM objects WHERE namespace_id = %s"
            " AND parent_id IS NOT NULL AND deleted_at IS NULL ORDER BY parent_id, position",
            ns):
        parts.setdefault(str(parent), []).append(int(position))
    for oid, want in expected.objects.items():
        n = 0 if want.deleted or not want.content else len(chunk_text(
            want.content, max_tokens=settings.chunk_max_tokens,
            overlap_tokens=settings.chunk_overlap_tokens))
        assert parts.get(oid, []) == list(range(n)), (
            f"object {oid} ({'deleted' if want.deleted else 'visible'}): visible parts at "
            f"{parts.get(oid, [])}, expected {n}")
    dup = rows(settings, "SELECT parent_id, position, count(*) FROM objects"
               " WHERE namespace_id = %s AND parent_id IS NOT NULL"
               " GROUP BY parent_id, position HAVING count(*) > 1", ns)
    assert not dup, f"duplicated parts: {dup[:5]}"


def _check_links(settings: Settings, ns: uuid.UUID, expected: Expected) -> None:
    found = {(str(a), str(t), str(b)): note for a, t, b, note in rows(
        settings, "SELECT from_id, relation_type, to_id, meta->>'note' FROM links"
        " WHERE namespace_id = %s AND deleted_at IS NULL", ns)}
    want = expected.visible_links
    assert set(found) == set(want), (
        f"links vs log: {len(set(want) - set(found))} missing, "
        f"{len(set(found) - set(want))} unexpected")
    stale = [k for k in want if (found[k] or "") != (want[k] or "")]
    assert not stale, f"{len(stale)} links with a stale note, e.g. {stale[0]}"
    dup = rows(settings, "SELECT from_id, relation_type, to_id, count(*) FROM links"
               " WHERE namespace_id = %s GROUP BY 1, 2, 3 HAVING count(*) > 1", ns)
    assert not dup, f"duplicated links: {dup[:5]}"


def _verify(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "verify", *args],
                          env=settings_env(settings), cwd=str(REPO), capture_output=True,
                          text=True, timeout=120, check=False)


def _only_vector_misses(report: str) -> bool:
    counts = [line.rsplit(None, 1) for line in report.splitlines() if line.startswith("  ")]
    return all(n == "0" or name.strip().startswith("vector index misses")
               for name, n in counts)


def assert_verify_clean(settings: Settings, attempts: int = 3) -> None:
    """`brainstream verify` exits 0 (a run racing the last relay round may see a transient
    drift, hence a few tries).

    One drift is FalkorDB's, not ours: 4.16 leaves orphan vector-index entries behind every
    SET of a node's embedding (re-puts change it), and the index then answers fewer than k
    (docs/operations.md, Verify and repair). verify reports it on purpose; the documented
    remedy, `verify --repair` (an index rebuild), must then leave it clean. Any other drift
    fails at once.
    """
    done = _verify(settings)
    for _ in range(attempts - 1):
        if done.returncode == 0:
            return
        if _only_vector_misses(done.stdout):
            repaired = _verify(settings, "--repair")
            assert "rebuilt the vector index" in repaired.stdout, (
                f"verify --repair exited {repaired.returncode} after:\n{done.stdout}\n"
                f"{repaired.stdout}{repaired.stderr[-600:]}\n{_vector_miss_detail(settings)}")
        time.sleep(2)
        done = _verify(settings)
    if done.returncode == 0:
        return
    raise AssertionError(f"brainstream verify exited {done.returncode}:\n{done.stdout}"
                         f"{done.stderr[-2000:]}\n{_vector_miss_detail(settings)}")


def _vector_miss_detail(settings: Settings) -> str:
    """For a failure message: what the vector index answers for the nodes it misses."""
    try:
        return _vector_miss_detail_unsafe(settings)
    except Exception as exc:  # a diagnostic must not hide the failure it explains
        return f"(no vector-index detail: {exc!r})"


def _vector_miss_detail_unsafe(settings: Settings) -> str:
    from pipeline.ops.verify import verify

    kinds = graph_rows(settings, "MATCH (n:Entity) RETURN typeOf(n.embedding), n.kind = '',"
                       " count(n)")
    dup = graph_rows(settings, "MATCH (n:Entity) WITH n.id AS id, count(n) AS c WHERE c > 1"
                     " RETURN count(id), collect(id)[0..3]")
    try:
        drift = verify(settings)
    except Exception as exc:
        return f"verify raised {exc!r}; graph embeddings by type {kinds}; duplicated ids {dup}"
    lines = []
    for oid in drift.vector_misses[:3]:
        for k in (10, 50):
            found = graph_rows(
                settings, "MATCH (n:Entity {id: $id}) CALL db.idx.vector.queryNodes("
                f"'Entity', 'embedding', {k}, n.embedding) YIELD node, score"
                " RETURN collect([node.id, score])", id=oid)
            hits = found[0][0] if found else []
            rank = [i for i, (hid, _) in enumerate(hits) if hid == oid]
            lines.append(f"{oid} k={k}: {len(hits)} hits, own rank {rank}, scores "
                         f"{[round(float(sc), 5) for _, sc in hits[:12]]}")
    return "\n".join(lines)


def summary(expected: Expected) -> str:
    outcomes = Counter(expected.outcomes.values())
    return (f"{expected.records} records, {len(expected.outcomes) + len(expected.dead)} "
            f"events ({dict(outcomes)}, dead {dict(Counter(expected.dead.values()))}); "
            f"{len(expected.visible)} visible objects, {len(expected.visible_links)} links")
