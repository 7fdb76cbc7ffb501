"""Helpers of the fault tests: own pipeline processes, fast publishing, Postgres/graph views."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import falkordb
import psycopg
from kafka import KafkaProducer

from pipeline.settings import Settings
from tests.pipelineutil import (
    Proc,
    envelope,
    pipeline_env,
    put,
    read_topic,
    wait_for,
)

log = logging.getLogger("tests.faults")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PIPELINE = ("consumer", "worker", "extract", "relay")


# -- processes ----------------------------------------------------------------------------

# kafka-python's log line once its producer went fatal: the process never publishes again
# (idempotent producers on the embedded broker after a kill -9; see test_crashes.py).
FATAL_PRODUCER = b"Unexpected error in InitProducerIdResponse"


class ProcSet:
    """A module's own consumer / worker / relay processes."""

    def __init__(self, settings: Settings, label: str, **env: str) -> None:
        self.settings = settings
        self.env = pipeline_env(settings, **env)
        self.log_dir = settings.resolved_data_dir / "fault-logs" / label
        self.procs: dict[str, Proc] = {}
        self.scanned: dict[str, int] = {}
        self.log_start: dict[str, int] = {}

    def start(self, *names: str, env: dict[str, str] | None = None) -> None:
        for name in names:
            self.stop(name)
            log_path = self.log_dir / f"{name}.log"
            self.scanned[name] = log_path.stat().st_size if log_path.exists() else 0
            self.log_start[name] = self.scanned[name]
            self.procs[name] = Proc(name, {**self.env, **(env or {})}, self.log_dir).start()

    def kill9(self, *names: str) -> None:
        for name in names:
            self.procs[name].kill9()

    def stop(self, *names: str) -> None:
        for name in names:
            if name in self.procs:
                self.procs[name].stop()

    def stop_all(self) -> None:
        for proc in self.procs.values():
            proc.stop()

    def assert_alive(self, *names: str) -> None:
        dead = [n for n in names if not self.procs[n].alive]
        assert not dead, f"pipeline processes died: {dead} (logs in {self.log_dir})"

    def log_since_start(self, name: str) -> str:
        """What the current incarnation of a process logged so far."""
        return self.log_since(name, self.log_start[name])

    def log_mark(self, name: str) -> int:
        """Where a process's log ends now (for `log_since`)."""
        log_path = self.log_dir / f"{name}.log"
        return log_path.stat().st_size if log_path.exists() else 0

    def log_since(self, name: str, mark: int) -> str:
        """What a process logged after `mark` (a `log_mark`)."""
        with open(self.log_dir / f"{name}.log", "rb") as fh:
            fh.seek(mark)
            return fh.read().decode("utf-8", "replace")

    def check_producers(self) -> None:
        """Fail at once, naming the process, if a Kafka producer of ours went fatal."""
        for name, proc in self.procs.items():
            if not proc.alive:
                continue
            start = max(0, self.scanned[name] - len(FATAL_PRODUCER))
            with open(self.log_dir / f"{name}.log", "rb") as fh:
                fh.seek(start)
                chunk = fh.read()
            self.scanned[name] = start + len(chunk)
            assert FATAL_PRODUCER not in chunk, (
                f"the {name}'s Kafka producer went fatal and will never publish again "
                f"(see {self.log_dir / name}.log)")

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until a probe put went all the way: consumer, embedding, relay into the graph."""
        probe = put(uuid.uuid4(), title="fault probe")
        oid = probe["data"]["id"]
        publish_fast(self.settings, [(probe, oid)])

        def ready() -> bool:
            self.check_producers()
            return graph_nodes_with_vector(self.settings, [oid]) == 1

        wait_for(ready, timeout=timeout,
                 what=f"the fault pipeline to index a probe (logs in {self.log_dir})")


@contextmanager
def running_procs(settings: Settings, label: str, env: dict[str, str]) -> Iterator[ProcSet]:
    """consumer + worker + relay with extra `env`, ready; stopped on exit."""
    procs = ProcSet(settings, label, **env)
    try:
        procs.start(*PIPELINE)
        procs.wait_ready()
        yield procs
    finally:
        procs.stop_all()


# -- publishing ---------------------------------------------------------------------------


def publish_fast(settings: Settings, events: Iterable[tuple[dict[str, Any], str]]) -> int:
    """Send (event, key) pairs pipelined, then wait until the broker acknowledged every one."""
    # Not idempotent: the embedded broker sometimes fails InitProducerId (UnknownError).
    producer = KafkaProducer(bootstrap_servers=settings.effective_kafka_bootstrap, acks="all",
                             enable_idempotence=False, retries=5, linger_ms=5,
                             max_in_flight_requests_per_connection=1,
                             max_request_size=8 * 1024 * 1024)
    try:
        futures = [producer.send(settings.topic_events, key=key.encode(),
                                 value=json.dumps(event).encode())
                   for event, key in events]
        producer.flush(timeout=60)
        for future in futures:
            future.get(timeout=60)
        return len(futures)
    finally:
        producer.close()


def link(namespace: uuid.UUID, from_id: str, to_id: str, relation_type: str,
         note: str) -> dict[str, Any]:
    return envelope("link.put", namespace, {"from": from_id, "to": to_id,
                                            "relation_type": relation_type,
                                            "meta": {"note": note}})


def long_content(seed: str, paragraphs: int = 3, words: int = 110) -> str:
    """Content that chunks into about `paragraphs` parts (each paragraph ~`words` tokens)."""
    return "\n\n".join(
        " ".join(f"{seed}w{p}x{i}" if i % 7 == 0 else "lorem" for i in range(words)) + "."
        for p in range(paragraphs))


# -- observing Postgres -------------------------------------------------------------------


def rows(settings: Settings, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        return conn.execute(sql, params).fetchall()


def scalar(settings: Settings, sql: str, *params: Any) -> Any:
    found = rows(settings, sql, *params)
    return found[0][0] if found else None


def ns_counts(settings: Settings, ns: uuid.UUID) -> dict[str, int]:
    """Row, embedding and outbox counts of one namespace (live rows only)."""
    (objects, first_class, parts, pending, done, failed), = rows(
        settings,
        "SELECT count(*), count(*) FILTER (WHERE o.parent_id IS NULL),"
        " count(*) FILTER (WHERE o.parent_id IS NOT NULL),"
        " count(*) FILTER (WHERE e.embed_status = 'pending'),"
        " count(*) FILTER (WHERE e.embed_status = 'done'),"
        " count(*) FILTER (WHERE e.embed_status = 'failed')"
        " FROM objects o JOIN object_embeddings e ON e.id = o.id"
        " WHERE o.namespace_id = %s AND o.deleted_at IS NULL", ns)
    backlog = scalar(settings, "SELECT count(*) FROM outbox WHERE namespace_id = %s"
                     " AND done_at IS NULL", ns)
    return {"objects": objects, "first_class": first_class, "parts": parts,
            "pending": pending, "done": done, "failed": failed, "backlog": int(backlog)}


def dead_letters_mentioning(settings: Settings, needles: Sequence[str]
                            ) -> list[tuple[bytes, dict[str, str]]]:
    """DLQ records whose value names any of `needles` (value, headers)."""
    wanted = [n.encode() for n in needles]
    return [(value, headers) for _, value, headers in read_topic(settings, settings.topic_dlq,
                                                                 timeout_ms=2000)
            if any(n in value for n in wanted)]


# -- observing the graph ------------------------------------------------------------------


def graph(settings: Settings) -> Any:
    return falkordb.FalkorDB.from_url(settings.effective_falkordb_url).select_graph(
        settings.graph_name)


def graph_rows(settings: Settings, query: str, **params: Any) -> list[list[Any]]:
    return list(graph(settings).query(query, params).result_set)


def graph_nodes_with_vector(settings: Settings, ids: Sequence[str]) -> int:
    found = graph_rows(settings, "UNWIND $ids AS id MATCH (n:Entity {id: id})"
                       " WHERE n.embedding IS NOT NULL RETURN count(n)", ids=list(ids))
    return int(found[0][0]) if found else 0


def graph_node_summary(settings: Settings, ns: uuid.UUID) -> dict[str, tuple[int, bool, Any]]:
    """id -> (how many nodes carry it, has an embedding, embedded_hash) for one namespace."""
    out: dict[str, tuple[int, bool, Any]] = {}
    for node_id, count, with_vec, hsh in graph_rows(
            settings, "MATCH (n:Entity) WHERE n.namespace = $ns"
            " RETURN n.id, count(n), sum(CASE WHEN n.embedding IS NULL THEN 0 ELSE 1 END),"
            " collect(n.embedded_hash)[0]", ns=str(ns)):
        out[str(node_id)] = (int(count), int(with_vec) == int(count), hsh)
    return out


def graph_edges(settings: Settings, ns: uuid.UUID) -> dict[tuple[str, str, str], int]:
    """(from, type, to) -> how many edges of one namespace."""
    return {(str(a), str(t), str(b)): int(c) for a, t, b, c in graph_rows(
        settings, "MATCH (a:Entity)-[e]->(b:Entity) WHERE e.namespace = $ns"
        " RETURN a.id, type(e), b.id, count(e)", ns=str(ns))}


def pg_edges(settings: Settings, ns: uuid.UUID) -> set[tuple[str, str, str]]:
    return {(str(a), str(t), str(b)) for a, t, b in rows(
        settings, "SELECT from_id, relation_type, to_id FROM links WHERE namespace_id = %s"
        " AND deleted_at IS NULL", ns)}


def assert_graph_matches_postgres(settings: Settings, ns: uuid.UUID, *,
                                  expect_vectors: bool = True) -> None:
    """Every live first-class object is exactly one node (with its vector), every link one edge."""
    pg_nodes = {str(oid): hsh for oid, hsh in rows(
        settings, "SELECT o.id, e.embedded_hash FROM objects o JOIN object_embeddings e"
        " ON e.id = o.id WHERE o.namespace_id = %s AND o.parent_id IS NULL"
        " AND o.deleted_at IS NULL", ns)}
    nodes = graph_node_summary(settings, ns)
    assert set(nodes) == set(pg_nodes), (
        f"graph nodes differ from Postgres: {len(set(pg_nodes) - set(nodes))} missing, "
        f"{len(set(nodes) - set(pg_nodes))} extra")
    duplicated = {k: v[0] for k, v in nodes.items() if v[0] != 1}
    assert not duplicated, f"duplicate nodes: {list(duplicated.items())[:5]}"
    if expect_vectors:
        no_vector = [k for k, v in nodes.items() if not v[1]]
        assert not no_vector, f"{len(no_vector)} nodes without an embedding"
        stale = [k for k, v in nodes.items() if v[2] != pg_nodes[k]]
        assert not stale, f"{len(stale)} nodes whose embedded_hash differs from Postgres"
    edges = graph_edges(settings, ns)
    assert set(edges) == pg_edges(settings, ns)
    assert all(c == 1 for c in edges.values()), "duplicate edges"


def wait_converged(settings: Settings, ns: uuid.UUID, *, objects: int, timeout: float,
                   procs: ProcSet | None = None) -> dict[str, int]:
    """Until every row of `ns` is embedded, the outbox drained and the graph holds every node."""
    deadline = time.monotonic() + timeout
    state: dict[str, int] = {}
    next_report = time.monotonic() + 5
    while True:
        if procs is not None:
            procs.check_producers()
            procs.assert_alive(*PIPELINE)
        state = ns_counts(settings, ns)
        if state["first_class"] == objects and not state["pending"] and not state["backlog"]:
            nodes = graph_node_summary(settings, ns)
            state["nodes"] = len(nodes)
            state["nodes_with_vector"] = sum(1 for v in nodes.values() if v[1])
            if state["nodes"] == state["nodes_with_vector"] == objects:
                return state
        if time.monotonic() > deadline:
            raise AssertionError(f"namespace {ns} did not converge in {timeout:.0f}s "
                                 f"({objects} objects): {state}; {_missing_vectors(settings, ns)}")
        if time.monotonic() > next_report:
            log.info("converging %s: %s", ns, state)
            next_report += 5
        time.sleep(0.5)


def _missing_vectors(settings: Settings, ns: uuid.UUID) -> str:
    """Which nodes lack a vector although Postgres has one (for failure messages)."""
    nodes = graph_node_summary(settings, ns)
    lacking = [k for k, v in nodes.items() if not v[1]]
    if not lacking:
        return "no node lacks a vector"
    (embedded, with_parts, synced_after), = rows(
        settings,
        "SELECT count(*) FILTER (WHERE (SELECT e.embedding IS NOT NULL FROM object_embeddings e"
        "   WHERE e.id = o.id)),"
        " count(*) FILTER (WHERE EXISTS (SELECT 1 FROM objects p WHERE p.parent_id = o.id)),"
        " count(*) FILTER (WHERE (SELECT count(*) FROM outbox b WHERE b.aggregate_id = o.id)"
        "   > 1)"
        " FROM objects o WHERE o.id = ANY(%s::uuid[])", lacking)
    return (f"{len(lacking)} nodes lack a vector: {embedded} embedded in Postgres, "
            f"{with_parts} have parts, {synced_after} got a node_sync after the put")


def elapsed(start: float) -> float:
    return time.monotonic() - start
