"""`brainstream replay` on the real services, with the real consumer, worker and relay running.

The module runs its own pipeline next to the session's (its own base database, graph, topics,
Celery Redis database and data directory), because a replay switches the active generation of the
deployment it runs in, and the session's other tests expect generation 1.

One replay is run (as a user runs it, a subprocess) over a corpus ingested through the live
pipeline while more events keep arriving; the tests then check determinism (Postgres rows, the
graph, `verify`, and the API's answers are the same), that live traffic landed exactly once, that
the API and the live consumer followed the switch, and dropping the old generation.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC
from typing import Any

import falkordb
import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg import sql

from api.app import create_app
from pipeline.generations.active import get_generation, list_generations
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import RawRecord, ingest_options
from pipeline.ingest.store.events import PgEventStore
from pipeline.kafka.markers import marker_record
from pipeline.kafka.offsets import committed_offsets
from pipeline.kafka.topics import ensure_topics
from pipeline.ops.generations import migrate_generations
from pipeline.settings import Settings
from tests.pipeline.replayutil import (
    BASE_DB,
    GRAPH,
    LiveReplayed,
    Replayed,
    all_indexed as _all_indexed,
    api_answers,
    clean as _clean,
    cli as _cli,
    compact_lexical,
    differences as _differences,
    graph_snapshot,
    live_traffic as _live_traffic,
    pg_snapshot,
    publish_corpus as _publish_corpus,
    publisher as _publisher,
    readyz_generation as _readyz_generation,
    replay_env as _env,
    wait_quiet,
)
from tests.pipelineutil import (
    Proc,
    put,
    read_topic,
    wait_for,
)
from tests.stackutil import EXAMPLES, TEST_DATA_DIR, make_settings

pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def rp(stack_settings: Settings) -> Iterator[Settings]:
    """A second deployment on the session's services: base database, graph, topics, Redis db."""
    server = stack_settings.effective_postgres_dsn.rsplit("/", 1)[0]
    _clean(stack_settings)
    with psycopg.connect(stack_settings.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(BASE_DB)))
    settings = make_settings(
        data_dir=TEST_DATA_DIR / "replay", postgres_dsn=f"{server}/{BASE_DB}",
        redis_url=f"redis://127.0.0.1:{stack_settings.redis_port}/5",
        topic_events="rp.events", topic_dlq="rp.events.dlq", topic_changes="rp.changes",
        graph_name=GRAPH)
    migrate_generations(settings)
    ensure_topics(settings)
    done = _cli(settings, "kinds", "apply", str(EXAMPLES / "kinds.yaml"))
    assert done.returncode == 0, done.stderr
    yield settings
    _clean(stack_settings)


LIVE_NS = str(uuid.uuid4())


@pytest.fixture(scope="module")
def replayed(rp: Settings) -> Iterator[Replayed]:
    settings = rp
    env = _env(settings)
    log_dir = settings.resolved_data_dir / "proc-logs"
    procs = {name: Proc(name, env, log_dir).start()
             for name in ("consumer", "worker", "extract", "relay")}
    pub = _publisher(settings)
    try:
        corpus = _publish_corpus(settings, pub)
        wait_quiet(settings, corpus, log_dir, timeout=300)
        pg_before = pg_snapshot(settings, corpus.namespaces)
        graph_before = graph_snapshot(settings, corpus.namespaces)
        api_settings = settings.model_copy(update={
            "api_keys": {corpus.api_key: [*corpus.namespaces, LIVE_NS]}})
        with TestClient(create_app(api_settings)) as client:
            assert _readyz_generation(client) == 1
            wait_for(lambda: client.get("/readyz").status_code == 200, timeout=120,
                     what="this host's lexical replica to build itself")
            compact_lexical(settings)
            api_before = api_answers(client, corpus)
            replay = _cli(settings, "replay", timeout=900)
            assert replay.returncode == 0, replay.stdout + replay.stderr[-4000:]
            switched = time.monotonic()
            wait_for(lambda: _readyz_generation(client) == 2, timeout=30,
                     what="the API to follow the switch")
            switched_within = time.monotonic() - switched
            states = {g.id: g.state for g in list_generations(settings)}
            # the index the replay built, checked before the comparison rewrites it
            lexical_verify = _cli(settings, "lexical", "verify", "--sample", "50")
            compact_lexical(settings)
            api_after = api_answers(client, corpus)
            yield Replayed(settings, corpus, pg_before, graph_before, api_before, api_after,
                           replay, states, switched_within, client, pub, lexical_verify)
    finally:
        pub.close()
        for proc in procs.values():
            proc.stop()


@pytest.fixture(scope="module")
def live_replayed(replayed: Replayed) -> LiveReplayed:
    settings = replayed.settings
    live_ids: list[str] = []
    stop = threading.Event()
    feeder = threading.Thread(target=_live_traffic,
                              args=(_publisher(settings), LIVE_NS, live_ids, stop))
    feeder.start()
    try:
        time.sleep(2)  # the live consumer applies some to generation 2 before the replay starts
        replay = _cli(settings, "replay", timeout=900)
    finally:
        stop.set()
        feeder.join(timeout=30)
    assert replay.returncode == 0, replay.stdout + replay.stderr[-4000:]
    wait_for(lambda: _readyz_generation(replayed.client) == 3, timeout=30,
             what="the API to follow the second switch")
    # after the switch: only the live consumer (moved to generation 3's group) can apply these
    for i in range(20):
        event = put(LIVE_NS, kind="company", title=f"After switch {i}")
        replayed.pub.send(event, event["data"]["id"])
        live_ids.append(event["data"]["id"])
    g3 = get_generation(settings, 3).settings(settings)
    wait_for(lambda: _all_indexed(g3, live_ids), timeout=180,
             what="live events to be indexed in generation 3")
    return LiveReplayed(replay, LIVE_NS, live_ids,
                        {g.id: g.state for g in list_generations(settings)})


def test_replay_reports_and_switches(replayed: Replayed) -> None:
    out = replayed.replay.stdout
    assert "generation 2 is active" in out
    assert "rejected again, not re-published" in out  # the poison event
    assert "replay g2 (records)" in replayed.replay.stderr  # the progress line
    assert replayed.states == {1: "retired", 2: "active"}
    # the poison event was dead-lettered once, by the live consumer, not again by the replay
    letters = read_topic(replayed.settings, replayed.settings.topic_dlq)
    assert len([v for _, v, _ in letters if b"poison" in v]) == 1


def test_the_same_model_embeds_nothing_the_live_generation_had(replayed: Replayed) -> None:
    """Every object row of the new generation took the live generation's stored vector (the
    same model): no model call, and (above and below) the same rows and the same answers."""
    found = re.search(r"([\d,]+) rows embedded, ([\d,]+) given their stored vectors",
                      replayed.replay.stdout)
    assert found is not None, replayed.replay.stdout
    assert found.group(1) == "0" and int(found.group(2).replace(",", "")) > 200


def test_postgres_and_graph_are_identical(replayed: Replayed) -> None:
    g2 = get_generation(replayed.settings, 2).settings(replayed.settings)
    after = pg_snapshot(g2, replayed.corpus.namespaces)
    assert len(after["objects"]) > 300
    # conversation memory too: 3 sessions, 25 messages (a repeated add stored once), 3 summaries
    assert (len(after["sessions"]), len(after["messages"]), len(after["summaries"])) == (3, 25, 3)
    for name in ("objects", "links", "ledger", "sessions", "messages", "summaries",
                 "link_versions", "object_versions"):
        assert after[name] == replayed.pg_before[name], name
    # the histories are not trivial: cut, corrected, retracted, ended, invalidated versions
    changes = {row[12] for row in after["link_versions"]}
    assert {"put", "cut", "retract", "delete"} <= changes, changes
    assert sum(row[13] is not None for row in after["link_versions"]) >= 3
    assert {"put", "delete"} <= {row[3] for row in after["object_versions"]}
    graph_after = graph_snapshot(g2, replayed.corpus.namespaces)
    assert len(graph_after["edges"]) > 50
    assert graph_after == replayed.graph_before


def test_verify_is_clean_on_the_new_generation(replayed: Replayed) -> None:
    done = _cli(replayed.settings, "verify")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Postgres and the graph agree" in done.stdout


def test_the_lexical_index_is_built_in_the_new_generation(replayed: Replayed) -> None:
    done = replayed.lexical_verify
    assert done.returncode == 0, done.stdout + done.stderr
    assert "generation 2:" in done.stdout and "agree" in done.stdout
    g2_dir = replayed.settings.resolved_data_dir / "lexical" / "gen-2"
    assert any(g2_dir.iterdir())  # built by the replay, beside generation 1's


def test_api_answers_the_same_after_the_switch(replayed: Replayed) -> None:
    (replayed.settings.resolved_data_dir / "api-answers.json").write_text(json.dumps(
        {"before": replayed.api_before, "after": replayed.api_after}, indent=1))
    assert _differences(replayed.api_before, replayed.api_after) == []
    assert sum(len(v) for v in replayed.api_after.values()) > 50
    assert replayed.switched_within < 10


def test_live_traffic_lands_once_in_the_new_generation(replayed: Replayed,
                                                       live_replayed: LiveReplayed) -> None:
    settings = replayed.settings
    assert "generation 3 is active" in live_replayed.replay.stdout
    assert live_replayed.states == {1: "retired", 2: "retired", 3: "active"}
    g3 = get_generation(settings, 3).settings(settings)
    with psycopg.connect(g3.effective_postgres_dsn) as conn:
        rows = conn.execute("SELECT count(*), count(DISTINCT event_id) FROM processed_events"
                            " WHERE namespace_id = %s", (live_replayed.live_ns,)).fetchone()
        objects = conn.execute("SELECT count(*) FROM objects WHERE namespace_id = %s",
                               (live_replayed.live_ns,)).fetchone()
    assert rows == (len(live_replayed.live_ids), len(live_replayed.live_ids))
    assert objects == (len(live_replayed.live_ids),)
    # the corpus is the same in the third generation as in the first
    after = pg_snapshot(g3, replayed.corpus.namespaces)
    assert after == replayed.pg_before
    # the live consumer consumes in generation 3's group now
    committed = committed_offsets(settings, settings.topic_events, g3.consumer_group)
    assert sorted(committed) == [0, 1, 2, 3]


def test_no_switch_since_then_activate_and_back(replayed: Replayed,
                                                live_replayed: LiveReplayed) -> None:
    settings = replayed.settings
    g3 = get_generation(settings, 3).settings(settings)
    with psycopg.connect(g3.effective_postgres_dsn) as conn:
        row = conn.execute("SELECT min(created_at) FROM objects WHERE namespace_id = %s",
                           (live_replayed.live_ns,)).fetchone()
    assert row is not None and row[0] is not None
    since = row[0].astimezone(UTC).replace(tzinfo=None, microsecond=0)  # the CLI takes UTC
    done = _cli(settings, "replay", "--no-switch", "--since", since.isoformat())
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert "generation 4 is ready" in done.stdout
    gens = {g.id: g for g in list_generations(settings)}
    assert gens[3].state == "active" and gens[4].state == "building"
    assert gens[4].handoff_at is not None and gens[4].since is not None
    g4 = gens[4].settings(settings)
    with psycopg.connect(g4.effective_postgres_dsn) as conn:
        corpus = conn.execute("SELECT count(*) FROM objects WHERE namespace_id::text = ANY(%s)",
                              (replayed.corpus.namespaces,)).fetchone()
        live = conn.execute("SELECT count(*) FROM objects WHERE namespace_id = %s",
                            (live_replayed.live_ns,)).fetchone()
    assert corpus == (0,)  # published before --since
    assert live == (len(live_replayed.live_ids),)
    for target in (4, 3):
        switched = _cli(settings, "generations", "activate", str(target))
        assert switched.returncode == 0, switched.stderr
        wait_for(lambda t=target: _readyz_generation(replayed.client) == t,
                 timeout=30, what=f"the API to follow generation {target}")
    event = put(LIVE_NS, kind="company", title="Back on generation 3")
    replayed.pub.send(event, event["data"]["id"])
    wait_for(lambda: _all_indexed(g3, [event["data"]["id"]]), timeout=120,
             what="the live consumer to follow generation 4 and back to 3")
    live_replayed.live_ids.append(event["data"]["id"])


def test_a_killed_replay_leaves_the_active_generation_alone(replayed: Replayed,
                                                            live_replayed: LiveReplayed) -> None:
    settings = replayed.settings
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "replay"],
                            env=_env(settings), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    try:
        for line in proc.stdout:  # killed once it is consuming into generation 5
            if line.startswith("replaying "):
                break
    finally:
        proc.kill()
        proc.wait(timeout=30)
    gens = {g.id: g for g in list_generations(settings)}
    assert gens[3].state == "active"
    assert gens[5].state == "building" and gens[5].handoff_at is None
    listed = _cli(settings, "generations", "list")
    assert "no hand-off yet" in listed.stdout
    refused = _cli(settings, "generations", "activate", "5")
    assert refused.returncode == 2 and "not caught up" in refused.stderr
    done = _cli(settings, "generations", "drop", "5", "--yes")
    assert done.returncode == 0, done.stderr
    assert get_generation(settings, 5).state == "dropped"
    assert _readyz_generation(replayed.client) == 3


def test_drop_old_generations(replayed: Replayed, live_replayed: LiveReplayed) -> None:
    settings = replayed.settings
    refused = _cli(settings, "generations", "drop", "3", "--yes")
    assert refused.returncode == 2 and "is active" in refused.stderr
    for gen in ("1", "2", "4"):
        done = _cli(settings, "generations", "drop", gen, "--yes")
        assert done.returncode == 0, done.stderr
    with psycopg.connect(settings.base_postgres_dsn) as conn:
        row = conn.execute("SELECT count(*) FROM objects").fetchone()
        gone = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                            (f"{BASE_DB}_g2",)).fetchone()
    assert row == (0,) and gone is None
    graphs = falkordb.FalkorDB.from_url(settings.effective_falkordb_url).list_graphs()
    assert GRAPH not in graphs and f"{GRAPH}_g2" not in graphs and f"{GRAPH}_g3" in graphs
    states = {g.id: g.state for g in list_generations(settings)}
    assert states == {1: "dropped", 2: "dropped", 3: "active", 4: "dropped", 5: "dropped"}
    # the API keeps answering from generation 3 (the graph-wide channels of find_objects now
    # also see the live traffic, so only the namespace-local answers are compared)
    compact_lexical(settings)
    now = api_answers(replayed.client, replayed.corpus)
    local = {k: v for k, v in replayed.api_before.items() if ":find_objects" not in k}
    assert _differences(local, {k: v for k, v in now.items() if k in local}) == []


def test_another_model_embeds_every_row(replayed: Replayed, live_replayed: LiveReplayed) -> None:
    """A replay with another embedder reuses nothing (its key matches no stored vector): every
    visible row of the new generation is embedded by it."""
    settings = replayed.settings
    done = _cli(settings, "replay", "--embedder", "minilm", "--no-switch", timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    found = re.search(r"generation (\d+): .* ([\d,]+) rows embedded, ([\d,]+) given their "
                      r"stored vectors", done.stdout)
    assert found is not None, done.stdout
    gen = get_generation(settings, int(found.group(1)))
    with psycopg.connect(gen.settings(settings).effective_postgres_dsn) as conn:
        row = conn.execute("SELECT count(*), count(*) FILTER (WHERE e.model LIKE 'minilm:%%'),"
                           " count(DISTINCT (e.namespace_id, e.embedded_hash))"
                           " FROM object_embeddings e JOIN objects o ON o.id = e.id"
                           " WHERE o.deleted_at IS NULL").fetchone()
    assert row is not None and row[0] == row[1] > 200
    # each distinct text of a namespace was given to the model (a row of the same text met
    # later in the same replay may take the vector it just computed)
    assert int(found.group(2).replace(",", "")) >= row[2]
    dropped = _cli(settings, "generations", "drop", str(gen.id), "--yes")
    assert dropped.returncode == 0, dropped.stderr


def test_markers_are_skipped_not_dead_lettered(db: psycopg.Connection[Any]) -> None:
    _, value, headers = marker_record(9, 0)
    records = [RawRecord("t", 0, 0, None, value, tuple(headers)),
               RawRecord("t", 0, 1, None, value)]
    with db.transaction():
        outcome = apply_batch(PgEventStore(db), records, ingest_options(make_settings()))
    assert outcome.markers == 2
    assert outcome.dead == [] and outcome.applied == 0
