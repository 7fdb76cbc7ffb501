"""Helpers of the replay tests (tests/pipeline/test_replay.py): the replay pipeline's own
settings and CLI, a corpus published through it, and snapshots of Postgres, the graph and the
API's answers to compare generations with."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import falkordb
import psycopg
from fastapi.testclient import TestClient
from psycopg import sql

from pipeline.domain.sessions import session_key
from pipeline.kafka.io import make_producer
from pipeline.settings import Settings
from tests.pipelineutil import (
    KEYED_NS,
    Publisher,
    envelope,
    pipeline_env,
    put,
    wait_for,
)
from tests.stackutil import EXAMPLES

BASE_DB = "brainstream_rp"
GRAPH = "rp"
WORDS = ["robot", "arm", "warehouse", "pilot", "rotterdam", "budget", "security", "review",
         "procurement", "contract", "forklift", "sensor", "battery", "conveyor", "logistics",
         "inventory", "shipment", "audit", "supplier"]


def replay_env(settings: Settings) -> dict[str, str]:
    return pipeline_env(settings, **{
        "BRAINSTREAM_TOPIC_EVENTS": settings.topic_events,
        "BRAINSTREAM_TOPIC_DLQ": settings.topic_dlq,
        "BRAINSTREAM_TOPIC_CHANGES": settings.topic_changes,
        "BRAINSTREAM_GRAPH_NAME": settings.graph_name,
        "BRAINSTREAM_CONSUMER_METRICS_PORT": "0",  # the session's pipeline has the test ports
        "BRAINSTREAM_WORKER_METRICS_PORT": "0",
    })


def publisher(settings: Settings) -> Publisher:
    """A test publisher whose producer is not idempotent (on the embedded broker a new
    idempotent producer can fail InitProducerId for good, see pipeline/kafka/io.py)."""
    pub = Publisher(settings)
    pub.producer.close()
    pub.producer = make_producer(settings)
    return pub


def cli(settings: Settings, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run `brainstream *args`; past `timeout` the test fails with what the command said."""
    try:
        return subprocess.run([sys.executable, "-m", "pipeline.cli", *args],
                              env=replay_env(settings), capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        said = "".join(_text(out)[-4000:] for out in (exc.stdout, exc.stderr))
        raise AssertionError(f"brainstream {' '.join(args)} timed out after {timeout} s; it said:"
                             f"\n{said}") from None


def _text(out: str | bytes | None) -> str:
    return out.decode(errors="replace") if isinstance(out, bytes) else out or ""


def clean(stack_settings: Settings) -> None:
    """Remove this module's databases and graphs (the session's stack is shared)."""
    with psycopg.connect(stack_settings.effective_postgres_dsn, autocommit=True) as conn:
        for name in (BASE_DB, *(f"{BASE_DB}_g{n}" for n in range(2, 6))):
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))
    db = falkordb.FalkorDB.from_url(stack_settings.effective_falkordb_url)
    for name in db.list_graphs():
        if name == GRAPH or name.startswith(f"{GRAPH}_g"):
            db.select_graph(name).delete()


@dataclass
class Corpus:
    namespaces: list[str]
    companies: list[str]
    notes: list[str]
    valid_events: int
    api_key: str = field(default_factory=lambda: f"rp-{uuid.uuid4().hex[:8]}")


def _sentence(i: int, n: int = 12) -> str:
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(n))


def publish_corpus(settings: Settings, pub: Publisher) -> Corpus:
    """The shared examples (via `brainstream publish`) plus a few hundred generated events."""
    done = cli(settings, "publish", str(EXAMPLES / "events.jsonl"))
    assert done.returncode == 0, done.stderr
    examples_ns = json.loads((EXAMPLES / "events.jsonl").read_text().splitlines()[0])["namespace"]
    # a namespace bound to a publisher key: the replay checks every signature again (deals far
    # from every query's words: the graph's indexes are global, see api_answers)
    signed = settings.resolved_data_dir / "signed.jsonl"
    signed.parent.mkdir(parents=True, exist_ok=True)
    signed.write_text("".join(json.dumps({"id": str(uuid.uuid4()), "kind": "deal",
                                          "title": f"Keyed ledger deal {i}",
                                          "properties": {"stage": "won"}}) + "\n"
                              for i in range(5)))
    done = cli(settings, "publish", str(signed), "--namespace", KEYED_NS, "--key-id", "tests-a")
    assert done.returncode == 0, done.stderr
    ns = str(uuid.uuid4())
    companies = [str(uuid.uuid4()) for _ in range(120)]
    notes = [str(uuid.uuid4()) for _ in range(100)]
    events: list[tuple[dict[str, Any], str]] = []
    for i, cid in enumerate(companies):
        events.append((put(ns, id=cid, kind="company", title=f"Company {i} {WORDS[i % 17]}",
                           summary=_sentence(i, 8),
                           properties={"industry": WORDS[i % 5], "public": i % 2 == 0}), cid))
    for i, nid in enumerate(notes):
        body = "\n\n".join(_sentence(i + p, 40) for p in range(1 + i % 4))
        events.append((put(ns, id=nid, kind="note", title=f"Note {i} on {WORDS[i % 11]}",
                           content=body, content_type="text/markdown",
                           properties={"author": WORDS[i % 3]}), nid))
    links = [(notes[i], "about", companies[(i * 3) % 100]) for i in range(60)]
    links += [(companies[i], "partner", companies[i + 1]) for i in range(0, 40, 2)]
    for frm, rel, to in links:
        events.append((envelope("link.put", ns, {"from": frm, "to": to, "relation_type": rel,
                                                 "meta": {"note": f"{rel} {_sentence(len(frm))}",
                                                          "confidence": 0.5}}), frm))
    # a link delete, soft deletes, a re-put with changed content (soft deletes of link
    # endpoints are left out: across partitions their order is not defined, see docs)
    events.append((envelope("link.delete", ns, {"from": links[0][0], "to": links[0][2],
                                                "relation_type": "about"}), links[0][0]))
    for cid in companies[100:110]:
        events.append((envelope("object.soft_delete", ns, {"id": cid}), cid))
    events.append((put(ns, id=notes[5], kind="note", title="Note 5 rewritten",
                       content="\n\n".join(_sentence(50 + p, 60) for p in range(6)),
                       content_type="text/markdown", properties={"author": "kim"}), notes[5]))
    events += _memory_events(ns)
    events += _history_events(ns)
    for value, key in events:
        pub.send(value, key)
    pub.send(b'{"this is": "a poison event"', "poison")  # dead-lettered, and again in replay
    pub.send(put(KEYED_NS, kind="deal", title="Unsigned: refused", properties={"stage": "won"}),
             "unsigned")  # refused live and in replay
    return Corpus([examples_ns, ns, KEYED_NS], companies, notes, valid_events=12 + len(events))


def _memory_events(ns: str) -> list[tuple[dict[str, Any], str]]:
    """Conversations (issue 12): adds (one repeated), a session put, a metadata key, an external
    summary, and a session deleted then revived, each keyed by its session."""
    events: list[tuple[dict[str, Any], str]] = []
    for s in range(3):
        sid, key = f"chat-{s}", str(session_key(uuid.UUID(ns), f"chat-{s}"))
        msgs = [{"uuid": str(uuid.uuid4()), "role": "user" if i % 2 else "assistant",
                 "content": _sentence(s * 10 + i, 10), "metadata": {"turn": i}}
                for i in range(8)]
        events.append((envelope("session.put", ns, {"session_id": sid, "user_id": f"u{s % 2}",
                                                    "metadata": {"n": s}}), key))
        for start in (0, 3, 3, 6):  # the second 3 repeats a batch: stored once
            events.append((envelope("messages.add", ns, {"session_id": sid,
                                                         "messages": msgs[start:start + 3]}),
                           key))
        events.append((envelope("message.metadata", ns, {"session_id": sid,
                                                         "uuid": msgs[1]["uuid"],
                                                         "key": "mood", "value": "calm"}), key))
        events.append((envelope("summary.put", ns, {"session_id": sid, "uuid": str(uuid.uuid4()),
                                                    "content": _sentence(s, 20),
                                                    "recent_message_uuid": msgs[4]["uuid"]}),
                       key))
        if s == 2:
            events.append((envelope("session.delete", ns, {"session_id": sid}), key))
            events.append((envelope("session.put", ns, {"session_id": sid}), key))
            events.append((envelope("messages.add", ns, {"session_id": sid, "messages": [
                {"uuid": str(uuid.uuid4()), "role": "user", "content": "back again"}]}), key))
    return events


# (the lexical replicas are the read hosts': an API's follower catches its own up)
QUIET_COUNTS = ("processed", "outbox_due", "embeddings_pending", "deferred",
                "extraction_pending", "proposals_pending")


def quiet_state(settings: Settings, corpus: Corpus) -> dict[str, int]:
    """What the live pipeline still has to do for the corpus (`processed` counts up to
    `corpus.valid_events`, the others down to 0)."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM processed_events WHERE namespace_id::text = ANY(%s)),"
            " (SELECT count(*) FROM outbox WHERE done_at IS NULL),"
            " (SELECT count(*) FROM object_embeddings e JOIN objects o ON o.id = e.id"
            "   WHERE e.embed_status = 'pending' AND o.deleted_at IS NULL),"
            " (SELECT count(*) FROM deferred_events),"
            # extraction runs in its own process (the `extract` queue), behind embedding
            " (SELECT count(*) FROM entity_extraction WHERE status = 'pending'),"
            " (SELECT count(*) FROM entity_proposal_queue q JOIN entities e ON e.id = q.entity_id"
            "   AND e.merged_into IS NULL)", (corpus.namespaces,)).fetchone()
    assert row is not None
    return dict(zip(QUIET_COUNTS, row, strict=True))


def wait_quiet(settings: Settings, corpus: Corpus, log_dir: Path, *, timeout: float) -> None:
    """Wait until the corpus is applied and nothing is pending; on a timeout fail with what is
    still pending and the end of each process's log, so a stall names its stage."""
    def quiet() -> bool:
        state = quiet_state(settings, corpus)
        return state["processed"] == corpus.valid_events and not any(
            v for k, v in state.items() if k != "processed")

    try:
        wait_for(quiet, timeout=timeout, what="the live pipeline to go quiet")
    except AssertionError as exc:
        tails = {log.name: log.read_text(errors="replace").splitlines()[-15:]
                 for log in sorted(log_dir.glob("*.log"))}
        raise AssertionError(
            f"{exc}: {quiet_state(settings, corpus)} (valid events {corpus.valid_events})\n"
            + "\n".join(f"--- {name}\n" + "\n".join(lines) for name, lines in tails.items())
        ) from None


def _history_events(ns: str) -> list[tuple[dict[str, Any], str]]:
    """A person's employers (`works_at`, functional in examples/kinds.yaml) published out of
    order, a correction, a delete and a retraction, and a plain link with its validity. Every
    event is keyed by the person, so none waits for an endpoint on another partition and the
    replay applies them in the same order (the system-time history depends on it)."""
    person = str(uuid.uuid4())
    firms = [str(uuid.uuid4()) for _ in range(4)]
    events = [put(ns, id=person, kind="note", title="Person with a career")]
    events += [put(ns, id=f, kind="company", title=f"Employer {i}") for i, f in enumerate(firms)]

    def link(to: str, rel: str = "works_at", **data: Any) -> dict[str, Any]:
        return envelope("link.put", ns, {"from": person, "to": to, "relation_type": rel, **data})

    def unlink(to: str, **data: Any) -> dict[str, Any]:
        return envelope("link.delete", ns, {"from": person, "to": to,
                                            "relation_type": "works_at", **data})

    events += [link(firms[2], valid_from="2022-01-01T00:00:00Z"),
               link(firms[0], valid_from="2010-01-01T00:00:00Z"),
               link(firms[1], valid_from="2016-01-01T00:00:00Z"),
               link(firms[1], valid_from="2016-01-01T00:00:00Z", meta={"role": "cto"}),
               link(firms[3], valid_from="2019-01-01T00:00:00Z"),
               unlink(firms[3], retract=True),
               unlink(firms[2], valid_to="2024-06-01T00:00:00+02:00"),
               link(firms[0], "partner", valid_from="2011-01-01T00:00:00Z",
                    valid_to="2013-01-01T00:00:00Z"),
               put(ns, id=person, kind="note", title="Person with a longer career")]
    return [(e, person) for e in events]


def pg_snapshot(settings: Settings, namespaces: list[str]) -> dict[str, Any]:
    """What Postgres holds for these namespaces, without timestamps (they are consume times)
    and without the embedding state of hidden rows (a race with the delete, invisible)."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        objects = conn.execute(
            "SELECT o.id, o.kind, o.title, o.summary, o.properties,"
            " md5(coalesce(o.content, '')), o.parent_id, o.position, o.index_text_hash,"
            # a hidden row's embedding depends on whether a worker got to it before the delete
            " CASE WHEN o.deleted_at IS NULL THEN e.embedded_hash END,"
            " CASE WHEN o.deleted_at IS NULL THEN e.embed_status END,"
            " CASE WHEN o.deleted_at IS NULL THEN md5(e.embedding::text) || e.model END,"
            " o.deleted_at IS NULL"
            " FROM objects o JOIN object_embeddings e ON e.id = o.id"
            " WHERE o.namespace_id::text = ANY(%s) ORDER BY o.id",
            (namespaces,)).fetchall()
        links = conn.execute(
            "SELECT from_id, relation_type, to_id, meta, deleted_at IS NULL FROM links"
            " WHERE namespace_id::text = ANY(%s) ORDER BY 1, 2, 3", (namespaces,)).fetchall()
        sessions = conn.execute(
            "SELECT id, session_id, user_id, metadata, last_seq, summary_seq, summary_uuid,"
            " deleted_at IS NULL FROM sessions WHERE namespace_id::text = ANY(%s) ORDER BY id",
            (namespaces,)).fetchall()
        messages = conn.execute(
            # without `system`: the extractors write it after commit, on their own time
            "SELECT uuid, session_pk, seq, role, md5(content), metadata - 'system',"
            " deleted_at IS NULL"
            " FROM messages WHERE namespace_id::text = ANY(%s) ORDER BY uuid",
            (namespaces,)).fetchall()
        summaries = conn.execute(
            "SELECT uuid, session_pk, md5(content), recent_message_uuid, recent_seq, source,"
            " deleted_at IS NULL FROM summaries WHERE namespace_id::text = ANY(%s) ORDER BY uuid",
            (namespaces,)).fetchall()
        ledger = conn.execute(
            "SELECT namespace_id, source, event_id, outcome FROM processed_events"
            " WHERE namespace_id::text = ANY(%s) ORDER BY 1, 2, 3", (namespaces,)).fetchall()
        # the histories, every column: their times are the records', the same in a replay
        link_versions = conn.execute(
            "SELECT * FROM link_versions WHERE namespace_id::text = ANY(%s)"
            " ORDER BY from_id, relation_type, to_id, seq", (namespaces,)).fetchall()
        object_versions = conn.execute(
            "SELECT * FROM object_versions WHERE namespace_id::text = ANY(%s)"
            " ORDER BY object_id, seq", (namespaces,)).fetchall()
    return {"objects": objects, "links": links, "ledger": ledger, "sessions": sessions,
            "messages": messages, "summaries": summaries, "link_versions": link_versions,
            "object_versions": object_versions}


def graph_snapshot(settings: Settings, namespaces: list[str]) -> dict[str, Any]:
    graph = falkordb.FalkorDB.from_url(settings.effective_falkordb_url).select_graph(
        settings.graph_name)
    nodes = graph.query(
        "MATCH (n:Entity) WHERE n.namespace IN $ns RETURN n.id, n.namespace, n.kind, n.title,"
        " n.index_text, n.embedded_hash ORDER BY n.id", {"ns": namespaces}).result_set
    edges = graph.query(
        "MATCH (a:Entity)-[e]->(b:Entity) WHERE e.namespace IN $ns RETURN a.id, type(e), b.id,"
        " e.note, e.status, e.role, e.confidence, e.evidence_id ORDER BY a.id, type(e), b.id",
        {"ns": namespaces}).result_set
    return {"nodes": nodes, "edges": edges}


def compact_lexical(settings: Settings) -> None:
    """`lexical rebuild` of the active generation, so that API answers compare across
    generations: Tantivy counts a replaced or deleted document in N, df and the mean length
    until it merges the segment away, so the lexical channel's BM25 depends on the order the
    index was written in (live commits, the replay's rounds), not only on the rows it holds.
    Rebuilt, each index holds exactly its rows (the replay's own index is checked by
    `lexical verify` first)."""
    done = cli(settings, "lexical", "rebuild")
    assert done.returncode == 0, done.stdout + done.stderr


def api_answers(client: TestClient, corpus: Corpus) -> dict[str, list[str]]:
    """The ids (in order) the API returns for a fixed set of requests in each namespace."""
    out: dict[str, list[str]] = {}
    for ns in corpus.namespaces:
        headers = {"Authorization": f"Bearer {corpus.api_key}", "X-Namespace": ns}
        calls: list[tuple[str, str, dict[str, Any]]] = [
            ("search", "/v1/search", {"query": "warehouse robot arms pilot", "limit": 20}),
            ("search2", "/v1/search", {"query": "security review procurement", "limit": 20}),
            ("search_filtered", "/v1/search", {"query": "battery conveyor", "limit": 20,
                                               "filters": {"kind": "note"}}),
            ("find_exact", "/v1/find_exact", {"query": "Company 17", "limit": 10}),
            ("find_objects", "/v1/find_objects", {"query": "company robotics", "limit": 20}),
            ("find_links", "/v1/find_links", {"relation_type": "about", "query": "sensor",
                                              "limit": 20}),
        ]
        for name, path, body in calls:
            resp = client.post(path, json=body, headers=headers)
            assert resp.status_code == 200, resp.text
            out[f"{ns}:{name}"] = [o["id"] for o in resp.json()["objects"]]
        seeds = corpus.notes[:3] + corpus.companies[:3] + ["0b9d7c7e-1111-4a2b-8c3d-000000000002"]
        for seed in seeds:
            resp = client.post("/v1/expand", headers=headers,
                               json={"object_id": seed, "max_hops": 2, "direction": "both",
                                     "limit": 50})
            if resp.status_code == 404:
                out[f"{ns}:expand:{seed}"] = ["404"]
                continue
            assert resp.status_code == 200, resp.text
            out[f"{ns}:expand:{seed}"] = [o["id"] for o in resp.json()["objects"]]
    return out


def readyz_generation(client: TestClient) -> int:
    return int(client.get("/readyz").json().get("generation", 0))


@dataclass
class Replayed:
    """Generation 2: a replay of the ingested corpus while nothing else is published (what the
    API answers depends on everything in the graph's global indexes, so the comparison is made
    on the same content)."""

    settings: Settings
    corpus: Corpus
    pg_before: dict[str, Any]
    graph_before: dict[str, Any]
    api_before: dict[str, list[str]]
    api_after: dict[str, list[str]]
    replay: subprocess.CompletedProcess[str]
    states: dict[int, str]
    switched_within: float
    client: TestClient
    pub: Publisher
    lexical_verify: subprocess.CompletedProcess[str]  # `lexical verify` on the replay's index


@dataclass
class LiveReplayed:
    """Generation 3: a replay while events keep arriving, and more after the switch."""

    replay: subprocess.CompletedProcess[str]
    live_ns: str
    live_ids: list[str]
    states: dict[int, str]


def live_traffic(pub: Publisher, ns: str, ids: list[str], stop: threading.Event) -> None:
    i = 0
    while not stop.is_set():
        event = put(ns, kind="company", title=f"Live company {i}", summary=_sentence(i, 6))
        pub.send(event, event["data"]["id"])
        ids.append(event["data"]["id"])
        i += 1
        time.sleep(0.1)



def all_indexed(settings: Settings, ids: list[str]) -> bool:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute("SELECT count(*) FROM object_embeddings WHERE id::text = ANY(%s)"
                           " AND embed_status = 'done'", (ids,)).fetchone()
    if not row or row[0] != len(ids):
        return False
    graph = falkordb.FalkorDB.from_url(settings.effective_falkordb_url).select_graph(
        settings.graph_name)
    found = graph.query("MATCH (n:Entity) WHERE n.id IN $ids RETURN count(n)",
                        {"ids": ids}).result_set
    return bool(found and found[0][0] == len(ids))



def differences(before: dict[str, list[str]], after: dict[str, list[str]]) -> list[str]:
    return [f"{key}: {before.get(key)} != {after.get(key)}" for key in sorted({*before, *after})
            if before.get(key) != after.get(key)]


