"""The extraction stage inside the pipeline's processes, with the default (heuristic) extractor:
documents published to the input topic get their entities from the worker; a worker killed
with SIGKILL mid-extraction loses and doubles nothing; `brainstream entities backfill` extracts
rows written before the entity layer."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from pipeline.domain.mentions import TextField
from pipeline.entities.extractors import build_extractor
from pipeline.entities.ids import counted_entities, pairs
from pipeline.entities.stage import EXTRACT_TEXT_CAP_CHARS, valid_mentions
from pipeline.entities.store import extraction
from pipeline.entities.writeback import COOCCUR_CAP
from pipeline.settings import Settings
from tests.entities.stageutil import apply, put, q
from tests.pipelineutil import Proc, Publisher, pipeline_env, wait_for
from tests.stackutil import TEST_DATA_DIR, fresh_database, settings_env

PEOPLE = ["Ada Lovelace", "Charles Babbage", "Grace Hopper", "Alan Turing", "Edsger Dijkstra",
          "Barbara Liskov", "Donald Knuth", "Margaret Hamilton"]
PLACES = ["London", "Cambridge", "Princeton", "Boston", "Amsterdam"]


def text(i: int) -> str:
    a, b = PEOPLE[i % len(PEOPLE)], PEOPLE[(i * 3 + 1) % len(PEOPLE)]
    return (f"In {PLACES[i % len(PLACES)]}, {a} wrote to {b} about the NATO report of "
            f"1968. Later {a} visited {PLACES[(i + 2) % len(PLACES)]}.")


def fresh_db(stack: Settings, **overrides: object) -> Settings:
    """A new migrated database with the example catalog, and settings that address it."""
    return fresh_database(stack, "entities", example_catalog=True, **overrides)


def check_consistent(settings: Settings, ns: uuid.UUID) -> int:
    """Every row of the namespace extracted once: its mentions are exactly what the extractor
    finds in its text now, and part_count and co-occurrence weights agree with the mentions.
    The number of mentions."""
    assert q(settings, "SELECT status, count(*) FROM entity_extraction WHERE namespace_id = %s"
             " AND status <> 'done' GROUP BY status", ns) == []
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM objects WHERE namespace_id = %s",
                                          (ns,)).fetchall()]
        rows = extraction.load(conn, ids, EXTRACT_TEXT_CAP_CHARS)
    found = build_extractor(settings).extract(
        [[TextField(f, t) for f, t in row.fields] for row in rows])
    expected = set()
    for row, got in zip(rows, found, strict=True):
        for m in valid_mentions(row, got).mentions:
            expected.add((row.id, m.field, m.start, m.end, m.text))
    actual = q(settings, "SELECT row_id, field, start_pos, end_pos, text FROM mentions"
               " WHERE namespace_id = %s", ns)
    assert len(actual) == len(set(actual)) and set(actual) == expected
    assert q(settings, "SELECT e.norm, e.part_count, c.n FROM entities e, LATERAL"
             " (SELECT count(DISTINCT m.row_id) AS n FROM mentions m JOIN objects o"
             "  ON o.id = m.row_id AND o.deleted_at IS NULL WHERE m.entity_id = e.id) c"
             " WHERE e.namespace_id = %s AND e.part_count <> c.n", ns) == []
    per_row: dict[uuid.UUID, dict[uuid.UUID, int]] = {}
    for row_id, entity in q(settings, "SELECT row_id, entity_id FROM mentions"
                                      " WHERE namespace_id = %s", ns):
        per_row.setdefault(row_id, {})[entity] = per_row.get(row_id, {}).get(entity, 0) + 1
    weights: dict[tuple[uuid.UUID, uuid.UUID], int] = {}
    for counts in per_row.values():
        for pair in pairs(counted_entities(counts, COOCCUR_CAP)):
            weights[pair] = weights.get(pair, 0) + 1
    edges = {(a, b): int(w) for a, b, w in q(
        settings, "SELECT from_id, to_id, weight FROM entity_edges WHERE namespace_id = %s"
        " AND edge_type = 'CO_OCCURS'", ns)}
    assert edges == weights
    return len(actual)


def test_published_documents_get_their_entities_from_the_worker(
        procs: dict[str, Proc], publisher: Publisher, catalog: Settings) -> None:
    ns = uuid.uuid4()
    ids = [uuid.uuid4() for _ in range(3)]
    for i, oid in enumerate(ids):
        publisher.send(put(ns, oid, title=f"Letter from {PEOPLE[i]}", content=text(i)),
                       str(oid))
    wait_for(lambda: q(catalog, "SELECT count(*) FROM entity_extraction WHERE namespace_id = %s"
                       " AND status = 'done'", ns)[0][0] == 2 * len(ids),
             timeout=60, what="the worker to extract every row")
    assert check_consistent(catalog, ns) > 0
    norms = {n for (n,) in q(catalog, "SELECT norm FROM entities WHERE namespace_id = %s", ns)}
    assert {"ada lovelace", "london"} <= norms


@pytest.fixture()
def worker_settings(stack_settings: Settings) -> Settings:
    """A database, a Celery broker database and a data dir of this test's own: its worker and
    beat never see the session's rows or tasks, nor the session's worker its."""
    redis = f"redis://127.0.0.1:{stack_settings.redis_port}/7"
    return fresh_db(stack_settings, redis_url=redis,
                    data_dir=TEST_DATA_DIR / f"entities-{uuid.uuid4().hex[:6]}")


@pytest.fixture()
def own_worker(worker_settings: Settings) -> Iterator[Proc]:
    """This test's extraction worker (not started), beside its own embedding worker whose
    sweep sends the extraction tasks."""
    env = pipeline_env(worker_settings, BRAINSTREAM_EXTRACT_BATCH_SIZE="2",
                       BRAINSTREAM_EXTRACT_LEASE_SECONDS="2",
                       BRAINSTREAM_WORKER_METRICS_PORT="0")
    log_dir = worker_settings.resolved_data_dir / "logs"
    sweeper = Proc("worker", env, log_dir).start()
    proc = Proc("extract", env, log_dir)
    yield proc
    proc.stop()
    sweeper.stop()


@pytest.mark.slow  # a kill -9 and a restart: `make faults` runs it
def test_worker_kill9_mid_extraction_loses_and_doubles_nothing(
        worker_settings: Settings, own_worker: Proc) -> None:
    ns = uuid.uuid4()
    count = 100
    apply(worker_settings, [put(ns, uuid.uuid4(), title=f"Letter {i} from {PEOPLE[i % 8]}",
                                content=text(i)) for i in range(count)])

    def done() -> int:
        return int(q(worker_settings, "SELECT count(*) FROM entity_extraction"
                     " WHERE namespace_id = %s AND status = 'done'", ns)[0][0])

    own_worker.start()  # the sweep finds the pending rows
    wait_for(lambda: done() >= 20, timeout=60, interval=0.02,
             what="the worker to be under way")
    own_worker.kill9()
    at_kill = done()
    assert at_kill < 2 * count, "the worker had finished before the kill"
    own_worker.env["BRAINSTREAM_EXTRACT_BATCH_SIZE"] = "32"  # small batches only to be caught
    own_worker.start()
    wait_for(lambda: done() == 2 * count, timeout=90, what="every row extracted after the kill")
    check_consistent(worker_settings, ns)


def test_backfill_extracts_rows_written_before_the_entity_layer(
        stack_settings: Settings) -> None:
    settings = fresh_db(stack_settings)
    ns, other = uuid.uuid4(), uuid.uuid4()
    apply(settings, [put(ns, uuid.uuid4(), title="Memo", content=text(i)) for i in range(4)]
          + [put(other, uuid.uuid4(), title="Memo", content=text(9))])
    # as if written before migration 0012: no extraction state at all
    q(settings, "DELETE FROM entity_extraction RETURNING row_id")
    env: dict[str, Any] = settings_env(settings)
    out = subprocess.run([sys.executable, "-m", "pipeline.cli", "entities", "backfill",
                          "--namespace", str(ns)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "marked 8 rows pending; extracted 8, failed 0" in out.stdout, out.stdout
    assert check_consistent(settings, ns) > 0
    assert q(settings, "SELECT count(*) FROM entity_extraction WHERE namespace_id = %s",
             other) == [(0,)]  # the other namespace was not asked for


def test_the_worker_merges_what_the_resolver_is_sure_of(
        procs: dict[str, Proc], publisher: Publisher, catalog: Settings) -> None:
    """After extraction the worker runs the proposal pass: "São Paulo" and "Sao Paulo" (equal
    once accents are folded: 0.95) become one entity; "Amendment 16" and "Amendment 17" stay
    two, and nothing merges across tenants."""
    ns, other = uuid.uuid4(), uuid.uuid4()
    docs = [(ns, "Travel notes", "São Paulo was hot. Amendment 16 was debated."),
            (ns, "More notes", "Sao Paulo had rain. Amendment 17 was debated."),
            (other, "Travel notes", "Sao Paulo is large.")]
    for namespace, title, content in docs:
        oid = uuid.uuid4()
        publisher.send(put(namespace, oid, title=title, content=content), str(oid))

    def live(namespace: uuid.UUID) -> set[str]:
        return {n for (n,) in q(catalog, "SELECT norm FROM entities WHERE namespace_id = %s"
                                " AND merged_into IS NULL", namespace)}

    def merged_once() -> bool:
        # both documents extracted (one alone also shows a single spelling), then merged
        names = live(ns)
        return ({"amendment 16", "amendment 17"} <= names
                and len({"são paulo", "sao paulo"} & names) == 1
                and q(catalog, "SELECT count(*) FROM entity_merges WHERE namespace_id = %s",
                      ns) != [(0,)])

    wait_for(merged_once, timeout=60, what="the worker to merge the accent variants")
    merged = q(catalog, "SELECT m.decided_by, m.method FROM entity_merges m"
               " WHERE m.namespace_id = %s", ns)
    assert merged == [("resolver", merged[0][1])] and merged[0][1]
    # the other tenant's document is extracted by its own task, maybe not yet
    wait_for(lambda: "sao paulo" in live(other), timeout=60,
             what="the other tenant's extraction")
    assert q(catalog, "SELECT count(*) FROM entity_merges WHERE namespace_id = %s",
             other) == [(0,)]
