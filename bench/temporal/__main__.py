"""As-of reads over a history of changing facts: correct answers, and their cost against reads
of the current state.

1. starts its own embedded stack (`.brainstream-bench/temporal`, ports = defaults + 1600 +
   BRAINSTREAM_TEST_PORT_OFFSET) and the real pipeline processes (consumer, embedding worker,
   relay); declares `works_at` functional in the catalog's relation types;
2. generates 1,000 people and 200 companies whose employer changes 1-5 times over ten years
   (`data.py`: puts with `valid_from`, some with `valid_to`, a few deletes), publishes the
   objects, then every link event shuffled (out of order) through the broker, and waits until
   the consumer has applied them all and the relay has projected the graph;
3. asks 1,000 sampled (person, world time) questions through the API (in-process app, HTTP
   semantics): `expand`, `find_links` (the person's token) and `paths` (to the employer then,
   and to a former or later one), all with `as_of`; each answer is compared with the
   generator's truth (the employer, and its version's `valid_from` / `valid_to`);
4. times `expand` of the same people through the engine as the API wires it, interleaved: the
   current state (the graph) and as of the question's time (the link versions), concurrency 1;
   and, as a diagnostic, as of the time as known at a given `known_at` (every version read by
   its recorded and invalidated times, not only the believed ones).

Targets: every read correct for 100% of the questions; as-of expand p95 <= 1.5x the
current-state expand p95.

Usage: python -m bench.temporal [--persons 1000] [--companies 200] [--questions 1000]
       [--seed 38] [--out FILE]
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from api.app import create_app
from bench.harness.inprocess import bench_settings, bench_stack, md_table
from bench.harness.processes import PipelineProcesses
from bench.harness.runenv import bench_parser, emit_report, log, machine_lines, quiet_logging
from bench.harness.timing import percentile
from bench.temporal.data import (
    RELATION,
    Corpus,
    Stint,
    generate,
    link_events,
    object_events,
    questions,
)
from pipeline.access import shorthand_name
from pipeline.domain.read_model import AsOf, ExpandQuery
from pipeline.domain.relations import RelationSpec
from pipeline.ingest.store.catalog import apply_relations
from pipeline.kafka.io import make_producer
from pipeline.kafka.publisher import EventPublisher
from pipeline.settings import Settings
from pipeline.wiring import build_services, freeze_startup_heap

PORT_OFFSET = 1600 + int(os.environ.get("BRAINSTREAM_TEST_PORT_OFFSET", "0"))
KEY = "bench-temporal-key"
RATIO_TARGET = 1.5


class Pipeline(PipelineProcesses):
    """The consumer, one embedding worker and the relay (no extraction: links only)."""

    def commands(self) -> dict[str, list[str]]:
        out = super().commands()
        del out["extract"]
        return out


def _count(settings: Settings, query: str, params: tuple[Any, ...]) -> int:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute(query, params).fetchone()
    return int(row[0]) if row else 0


def _wait(what: str, progress: Callable[[], int], goal: int, processes: Pipeline,
          stall: float = 60.0) -> float:
    """Wait until `progress()` reaches `goal`; raise when it stops moving for `stall` s (an
    event dead-lettered, a stuck stage: the run would be void)."""
    started = last_move = time.monotonic()
    seen = -1
    while (now := progress()) < goal:
        processes.check_alive()
        if now != seen:
            seen, last_move = now, time.monotonic()
        elif time.monotonic() - last_move > stall:
            raise RuntimeError(f"{what}: stuck at {now} of {goal} (see the logs and the DLQ)")
        time.sleep(0.5)
    took = time.monotonic() - started
    log(f"{what}: {took:.1f} s")
    return took


def publish(settings: Settings, corpus: Corpus, processes: Pipeline, rng: random.Random
            ) -> dict[str, int]:
    """Objects first (so no link waits for its ends), then the link events shuffled; wait
    until every event is applied and the graph projected."""
    producer = make_producer(settings)
    publisher = EventPublisher(producer, settings.topic_events)
    objects, links = object_events(corpus), link_events(corpus, rng)
    ns = corpus.namespace
    try:
        for event in objects:
            publisher.send_event(event)
        publisher.flush()
        _wait("objects applied", lambda: _count(
            settings, "SELECT count(*) FROM objects WHERE namespace_id = %s", (ns,)),
            len(objects), processes)
        for event in links:
            publisher.send_event(event)
        publisher.flush()
    finally:
        producer.close()
    _wait("link events applied", lambda: _count(
        settings, "SELECT count(DISTINCT recorded_by) FROM link_versions WHERE namespace_id = %s",
        (ns,)), len(links), processes)
    _wait("embedded and projected", lambda: -_count(
        settings, "SELECT (SELECT count(*) FROM outbox WHERE done_at IS NULL)"
        " + (SELECT count(*) FROM object_embeddings WHERE embed_status = 'pending')",
        ()), 0, processes)
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute("ANALYZE")
        versions = conn.execute("SELECT count(*), count(*) FILTER (WHERE invalidated_at IS"
                                " NOT NULL) FROM link_versions WHERE namespace_id = %s",
                                (ns,)).fetchone()
    assert versions is not None
    return {"objects": len(objects), "link events": len(links),
            "puts": sum(e["type"].endswith("link.put") for e in links),
            "deletes": sum(e["type"].endswith("link.delete") for e in links),
            "link versions": int(versions[0]), "invalidated versions": int(versions[1])}


def _stamp(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat().replace("+00:00", "Z")


def _relation_says(obj: dict[str, Any], stint: Stint) -> bool:
    rel = obj["relation"] or {}
    return (rel.get("type") == RELATION and rel.get("valid_from") == _stamp(stint.start)
            and rel.get("valid_to") == _stamp(stint.end))


def check(client: TestClient, corpus: Corpus, asked: list[tuple[int, datetime]]
          ) -> dict[str, tuple[int, list[str]]]:
    """Each read's correct count over the questions, and the first few misses."""
    headers = {"Authorization": f"Bearer {KEY}"}
    tally: dict[str, tuple[int, list[str]]] = {
        "expand": (0, []), "find_links": (0, []), "paths": (0, [])}

    def note(read: str, ok: bool, why: str) -> None:
        good, misses = tally[read]
        tally[read] = (good + ok, misses if ok or len(misses) >= 5 else [*misses, why])

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = client.post(path, json=body, headers=headers)
        if response.status_code != 200:
            raise RuntimeError(f"{path}: {response.status_code} {response.text[:300]}")
        answer: dict[str, Any] = response.json()
        return answer

    for person, at in asked:
        pid, when = str(corpus.persons[person]), _stamp(at)
        truth = corpus.holding(person, at)
        want = [] if truth is None else [str(corpus.companies[truth.company])]
        why = f"p{person:04d} at {when}: want {want}"
        got = post("/v1/expand", {"object_id": pid, "relation_types": [RELATION],
                                  "direction": "out", "want_containment": False,
                                  "as_of": when})["objects"]
        note("expand", [o["id"] for o in got] == want
             and (truth is None or _relation_says(got[0], truth)),
             f"{why}, got {[(o['id'], o['relation']) for o in got]}")
        got = post("/v1/find_links", {"relation_type": RELATION, "query": f"p{person:04d}",
                                      "as_of": when})["objects"]
        note("find_links", [o["id"] for o in got] == want
             and (truth is None or (_relation_says(got[0], truth)
                                    and got[0]["relation"]["source_id"] == pid)),
             f"{why}, got {[(o['id'], o['relation']) for o in got]}")
        others = [s for s in corpus.stints[person] if s is not truth]
        good = True
        for stint, holds in ([(truth, True)] if truth else []) + [(s, False) for s in others[:1]]:
            found = post("/v1/paths", {"from": [pid], "to": [str(corpus.companies[stint.company])],
                                       "max_hops": 1, "as_of": when})["paths"]
            good = good and ([[e["relation_type"] for e in p["edges"]] for p in found]
                             == ([[RELATION]] if holds else []))
        note("paths", good, why)
    return tally


async def timings(settings: Settings, corpus: Corpus, asked: list[tuple[int, datetime]],
                  known_at: datetime) -> dict[str, list[float]]:
    """Latencies (s) of expand on the same people: now (the graph), as of the question's time,
    and as of it as known at `known_at`; interleaved, concurrency 1."""
    services = await build_services(settings)
    freeze_startup_heap()  # as the API process does once it is wired
    out: dict[str, list[float]] = {"current": [], "as_of": [], "as_of_known_at": []}
    ns = corpus.namespace
    try:
        variants = {"current": None, "as_of": "w", "as_of_known_at": "wk"}
        for person, at in asked[:50]:  # warm-up
            for kind in variants.values():
                point = None if kind is None else AsOf(at, known_at if kind == "wk" else None)
                await services.graph.expand(ns, ExpandQuery((corpus.persons[person],), at=point))
        for person, at in asked:
            for name, kind in variants.items():
                point = None if kind is None else AsOf(at, known_at if kind == "wk" else None)
                started = time.perf_counter()
                page = await services.graph.expand(ns, ExpandQuery((corpus.persons[person],),
                                                                   at=point))
                out[name].append(time.perf_counter() - started)
                if page.degrade:
                    raise RuntimeError(f"expand degraded: {page.degrade}")
    finally:
        await services.close()
    return out


def report(counts: dict[str, int], tally: dict[str, tuple[int, list[str]]], total: int,
           lat: dict[str, list[float]], known_at: datetime) -> str:
    lines = ["# bench.temporal: as-of reads over a changing history", "", *machine_lines(), "",
             "Corpus: " + ", ".join(f"{k} {v:,}" for k, v in counts.items()), ""]
    rows = [[read, f"{good:,} / {total:,}", "100%",
             "PASS" if good == total else "FAIL"] for read, (good, _) in tally.items()]
    lines += ["## Correct answers (as_of, against the generator's truth)", "",
              md_table(["read", "correct / total", "target", "verdict"], rows), ""]
    for read, (_, misses) in tally.items():
        lines += [f"- {read} miss: {m}" for m in misses]
    base = percentile(lat["current"], 95)
    names = {"current": "expand, current state (graph)",
             "as_of": "expand as_of (link versions, as known now)",
             "as_of_known_at": f"expand as_of + known_at {_stamp(known_at)} (diagnostic)"}
    rows = []
    for key, name in names.items():
        p95 = percentile(lat[key], 95)
        verdict = ("baseline" if key == "current" else
                   ("PASS" if p95 <= RATIO_TARGET * base else "FAIL") if key == "as_of"
                   else "none")
        rows.append([name, str(len(lat[key])), f"{percentile(lat[key], 50) * 1000:.2f}",
                     f"{p95 * 1000:.2f}", f"{p95 / base:.2f}x",
                     f"<= {RATIO_TARGET}x" if key == "as_of" else "", verdict])
    lines += ["", "## Expand latency (engine as the API wires it, c=1, interleaved)", "",
              md_table(["read", "calls", "p50 ms", "p95 ms", "p95 / current", "target",
                        "verdict"], rows)]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Generate, publish, ask, time; print the Markdown report to stdout."""
    parser = bench_parser(__doc__, "python -m bench.temporal")
    parser.add_argument("--persons", type=int, default=1000)
    parser.add_argument("--companies", type=int, default=200)
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--out", type=str, default=None, help="also write the report here")
    args = parser.parse_args()
    quiet_logging()
    rng = random.Random(args.seed)
    corpus = generate(args.persons, args.companies, args.seed)
    settings = bench_settings("temporal", PORT_OFFSET, "static", api_keys={
        KEY: {"name": shorthand_name(KEY), "scopes": {str(corpus.namespace): ["read"]}}})
    with bench_stack(settings, fresh=True):
        with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
            apply_relations(conn, [RelationSpec(RELATION, "employer", functional=True)])
        processes = Pipeline(settings, workers=1)
        processes.start()
        try:
            counts = publish(settings, corpus, processes, rng)
        finally:
            processes.stop()
        asked = questions(corpus, args.questions, rng)
        log(f"asking {len(asked)} questions")
        with TestClient(create_app(settings)) as client:
            tally = check(client, corpus, asked)
        known_at = datetime.now(UTC)
        lat = asyncio.run(timings(settings, corpus, asked, known_at))
    emit_report(report(counts, tally, len(asked), lat, known_at),
                Path(args.out) if args.out else None)


if __name__ == "__main__":
    main()

