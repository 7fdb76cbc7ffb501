"""The write path end to end on the real services: events in, Postgres + graph + topics out."""

from __future__ import annotations

import json
import uuid
from typing import Any

import falkordb
import psycopg
import pytest

from pipeline.settings import Settings
from tests.pipeline.conftest import EXAMPLES, indexed
from tests.pipelineutil import Proc, Publisher, envelope, put, read_topic, wait_for

pytestmark = pytest.mark.stack


def _rows(settings: Settings, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        return conn.execute(sql, params).fetchall()


def _graph(settings: Settings) -> Any:
    return falkordb.FalkorDB.from_url(settings.effective_falkordb_url).select_graph(
        settings.graph_name)


def _changes(settings: Settings, object_id: str) -> list[dict[str, Any]]:
    out = []
    for key, value, _ in read_topic(settings, settings.topic_changes, timeout_ms=1500):
        if key == object_id.encode():
            out.append(json.loads(value))
    return out


def _dead_letters(settings: Settings, marker: str) -> list[dict[str, str]]:
    return [headers for _, value, headers in read_topic(settings, settings.topic_dlq,
                                                        timeout_ms=1500)
            if marker.encode() in value]


def test_example_events_land(procs: dict[str, Proc], catalog: Settings,
                             publisher: Publisher) -> None:
    settings = catalog
    for line in (EXAMPLES / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        data = event["data"]
        publisher.send(line.encode(), data.get("id") or data.get("from"))
    company, deal, note = (f"0b9d7c7e-1111-4a2b-8c3d-00000000000{i}" for i in (1, 2, 3))
    wait_for(lambda: indexed(settings, company) and indexed(settings, deal), what="examples")
    # the note was chunked, then soft-deleted: hidden with its parts, gone from the graph
    wait_for(lambda: _rows(settings, "SELECT count(*) FROM objects WHERE parent_id = %s"
                           " AND deleted_at IS NOT NULL", note)[0][0] >= 1, what="note parts")
    assert _rows(settings, "SELECT deleted_at IS NOT NULL FROM objects WHERE id = %s",
                 note) == [(True,)]
    graph = _graph(settings)
    wait_for(lambda: graph.query("MATCH (n:Entity {id: $id}) RETURN count(n)",
                                 {"id": note}).result_set == [[0]], what="note node removed")
    edges = graph.query("MATCH (a:Entity {id: $a})-[e:buyer]->(b:Entity) RETURN a.id, b.id,"
                        " e.note, e.role, e.confidence", {"a": deal}).result_set
    assert edges == [[deal, company, "Acme is the buying entity", "primary buyer", 0.95]]
    assert graph.query("MATCH (:Entity {id: $n})-[e:about]->() RETURN count(e)",
                       {"n": note}).result_set == [[0]]
    assert _rows(settings, "SELECT deleted_at IS NOT NULL FROM links WHERE relation_type ="
                 " 'about' AND from_id = %s", note) == [(True,)]
    # vectors in Postgres and the graph, properties as sent
    (props, dims), = _rows(settings, "SELECT o.properties, vector_dims(e.embedding) FROM objects o"
                           " JOIN object_embeddings e ON e.id = o.id WHERE o.id = %s", deal)
    assert props["stage"] == "prospect" and dims == settings.vector_dim
    kinds = {c["type"] for c in wait_for(lambda: _changes(settings, deal), what="changes")}
    assert {"brainstream.object.indexed", "brainstream.link.indexed"} <= kinds


def test_duplicate_delivery_changes_nothing_twice(procs: dict[str, Proc], catalog: Settings,
                                                  publisher: Publisher) -> None:
    ns = uuid.uuid4()
    event = put(ns, kind="company", title="Duplicate Co", content="Once only.\n\nTwice never.")
    oid = event["data"]["id"]
    for _ in range(3):
        publisher.send(event, oid)
    wait_for(lambda: indexed(catalog, oid), what="the duplicated put")
    publisher.send(event, oid)  # a late duplicate, after the first was fully applied
    marker = put(ns, title="after duplicates")
    publisher.send(marker, oid)  # same partition: once it lands, the duplicate was consumed
    wait_for(lambda: indexed(catalog, marker["data"]["id"]), what="the marker put")
    assert _rows(catalog, "SELECT count(*) FROM processed_events WHERE event_id = %s",
                 event["id"]) == [(1,)]
    assert _rows(catalog, "SELECT count(*) FROM outbox WHERE aggregate_id = %s", oid
                 )[0][0] == 2  # one from the put, one when the embeddings were done
    indexed_events = [c for c in _changes(catalog, oid)
                      if c["type"] == "brainstream.object.indexed"]
    assert len(indexed_events) == 1


def _poison_cases(ns: uuid.UUID, marker: str, existing: dict[str, str]) -> list[
        tuple[str, bytes | dict[str, Any]]]:
    big = put(ns, title=marker, content="x " * 600_000)
    return [
        ("malformed_json", f'{{"not json {marker}'.encode()),
        ("invalid_envelope", {"specversion": "1.0", "id": marker, "type":
                              "brainstream.object.put", "namespace": str(ns), "data": {}}),
        ("unknown_event_type", envelope("object.explode", ns, {"id": str(uuid.uuid4()),
                                                               "title": marker})),
        ("invalid_payload", envelope("object.put", ns, {"kind": "company", "title": marker,
                                                        "properties": {"bad key!": 1}})),
        ("unknown_kind", put(ns, kind="spaceship", title=marker)),
        ("missing_required_field", put(ns, kind="deal", title=marker, properties={})),
        ("wrong_field_type", put(ns, kind="deal", title=marker,
                                 properties={"stage": "won", "amount": "lots"})),
        ("link_endpoint_not_found", envelope("link.put", ns, {
            "from": existing["company"], "to": str(uuid.uuid4()), "relation_type": "knows",
            "meta": {"note": marker}})),
        ("link_endpoint_not_found", envelope("link.put", ns, {
            "from": existing["company"], "to": existing["foreign"], "relation_type": "knows",
            "meta": {"note": marker}})),
        ("link_endpoint_deleted", envelope("link.put", ns, {
            "from": existing["company"], "to": existing["deleted"], "relation_type": "knows",
            "meta": {"note": marker}})),
        ("link_endpoint_is_part", envelope("link.put", ns, {
            "from": existing["company"], "to": existing["part"], "relation_type": "knows",
            "meta": {"note": marker}})),
        ("payload_too_large", big),
    ]


def test_poison_events_are_dead_lettered_and_never_block(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    ns, other_ns = uuid.uuid4(), uuid.uuid4()
    company = put(ns, kind="company", title="Poison Target")
    foreign = put(other_ns, kind="company", title="Other tenant")
    deleted = put(ns, kind="company", title="Soon deleted")
    note = put(ns, kind="note", title="Has parts", content="First part.\n\nSecond part.")
    key = company["data"]["id"]
    for event in (company, foreign, deleted, note):
        publisher.send(event, key)
    publisher.send(envelope("object.soft_delete", ns, {"id": deleted["data"]["id"]}), key)
    wait_for(lambda: indexed(catalog, note["data"]["id"]), what="setup objects")
    (part_id,), = _rows(catalog, "SELECT id FROM objects WHERE parent_id = %s LIMIT 1",
                        note["data"]["id"])
    existing = {"company": key, "foreign": foreign["data"]["id"],
                "deleted": deleted["data"]["id"], "part": str(part_id)}
    marker = f"poison-{uuid.uuid4().hex}"
    cases = _poison_cases(ns, marker, existing)
    goods = []
    for _code, value in cases:
        publisher.send(value, key)  # one partition: each poison sits right before a good event
        good = put(ns, title=f"good after poison {len(goods)}")
        publisher.send(good, key)
        goods.append(good["data"]["id"])
    wait_for(lambda: all(indexed(catalog, g) for g in goods), timeout=90,
             what="every good event after a poison one")
    letters = wait_for(lambda: (found := _dead_letters(catalog, marker)) and
                       len(found) >= len(cases) and found, what="dead letters")
    assert sorted(h["brainstream.error.code"] for h in letters) == sorted(c for c, _ in cases)
    for headers in letters:
        assert headers["brainstream.source.topic"] == catalog.topic_events
        assert int(headers["brainstream.source.offset"]) >= 0
        assert headers["brainstream.error.message"]
    assert _rows(catalog, "SELECT count(*) FROM objects WHERE title = %s", marker) == [(0,)]


def test_older_version_is_ignored(procs: dict[str, Proc], catalog: Settings,
                                  publisher: Publisher) -> None:
    ns, oid = uuid.uuid4(), str(uuid.uuid4())
    newer = envelope("object.put", ns, {"id": oid, "kind": "company", "title": "v3"}, version=3)
    older = envelope("object.put", ns, {"id": oid, "kind": "company", "title": "v2"}, version=2)
    publisher.send(newer, oid)
    publisher.send(older, oid)
    marker = put(ns, title="after versions")
    publisher.send(marker, oid)
    wait_for(lambda: indexed(catalog, marker["data"]["id"]), what="marker")
    assert _rows(catalog, "SELECT title, source_version FROM objects WHERE id = %s",
                 oid) == [("v3", 3)]
    assert _rows(catalog, "SELECT outcome FROM processed_events WHERE event_id = %s",
                 older["id"]) == [("stale",)]


def test_soft_delete_then_reput_revives_node_and_edges(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    ns = uuid.uuid4()
    a = put(ns, kind="company", title="Revivable", content="Alpha.\n\nBeta.")
    b = put(ns, kind="company", title="Neighbour")
    aid, bid = a["data"]["id"], b["data"]["id"]
    for event in (a, b, envelope("link.put", ns, {"from": aid, "to": bid,
                                                  "relation_type": "partner",
                                                  "meta": {"note": "long-time partner"}})):
        publisher.send(event, aid)
    graph = _graph(catalog)
    edge_count = "MATCH (:Entity {id: $a})-[e:partner]->(:Entity {id: $b}) RETURN count(e)"
    wait_for(lambda: graph.query(edge_count, {"a": aid, "b": bid}).result_set == [[1]],
             what="edge")
    publisher.send(envelope("object.soft_delete", ns, {"id": aid}), aid)
    wait_for(lambda: graph.query("MATCH (n:Entity {id: $a}) RETURN count(n)",
                                 {"a": aid}).result_set == [[0]], what="node removed")
    assert _rows(catalog, "SELECT count(*) FROM objects WHERE parent_id = %s AND deleted_at IS"
                 " NULL", aid) == [(0,)]
    publisher.send(put(ns, id=aid, kind="company", title="Revivable",
                       content="Alpha.\n\nBeta."), aid)
    wait_for(lambda: graph.query(edge_count, {"a": aid, "b": bid}).result_set == [[1]],
             what="edge restored after re-put")
    assert _rows(catalog, "SELECT count(*) FROM objects WHERE (id = %s OR parent_id = %s)"
                 " AND deleted_at IS NOT NULL", aid, aid) == [(0,)]


def test_link_before_its_endpoint_waits_then_lands(procs: dict[str, Proc], catalog: Settings,
                                                  publisher: Publisher) -> None:
    """Links are keyed by `from`, puts by their own id: a link can be consumed before the put
    of its `to` endpoint. It waits (bounded) instead of being dead-lettered."""
    ns = uuid.uuid4()
    a, b = put(ns, title="Early linker"), put(ns, title="Late endpoint")
    aid, bid = a["data"]["id"], b["data"]["id"]
    publisher.send(a, aid)
    wait_for(lambda: indexed(catalog, aid), what="the from endpoint")
    link = envelope("link.put", ns, {"from": aid, "to": bid, "relation_type": "supplies",
                                     "meta": {"note": "arrived early"}})
    unlink = envelope("link.delete", ns, {"from": aid, "to": bid, "relation_type": "supplies"})
    relink = envelope("link.put", ns, {"from": aid, "to": bid, "relation_type": "supplies",
                                       "meta": {"note": "final state"}})
    for event in (link, unlink, relink):
        publisher.send(event, aid)  # the link events wait, in order, for b
    wait_for(lambda: _rows(catalog, "SELECT count(*) FROM deferred_events WHERE wait_key LIKE"
                           " %s", f"%{bid}%")[0][0] == 3, what="three deferred link events")
    publisher.send(b, bid)
    graph = _graph(catalog)
    wait_for(lambda: graph.query(
        "MATCH (:Entity {id: $a})-[e:supplies]->(:Entity {id: $b}) RETURN e.note",
        {"a": aid, "b": bid}).result_set == [["final state"]], what="the link, in order")
    assert _rows(catalog, "SELECT count(*) FROM deferred_events WHERE wait_key LIKE %s",
                 f"%{bid}%") == [(0,)]
    assert _dead_letters(catalog, bid) == []


def test_link_to_an_object_that_never_comes_is_dead_lettered(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    ns = uuid.uuid4()
    a = put(ns, title="Lonely")
    ghost = str(uuid.uuid4())
    publisher.send(a, a["data"]["id"])
    publisher.send(envelope("link.put", ns, {"from": a["data"]["id"], "to": ghost,
                                             "relation_type": "haunts"}), a["data"]["id"])
    # BRAINSTREAM_DEFER_SECONDS=4 in the test processes; the sweep retries between batches
    letters = wait_for(lambda: _dead_letters(catalog, ghost), timeout=60,
                       what="the expired link's dead letter")
    assert [h["brainstream.error.code"] for h in letters] == ["link_endpoint_not_found"]
    assert letters[0]["brainstream.error.field"] == "data.to"
    assert _rows(catalog, "SELECT count(*) FROM deferred_events WHERE wait_key LIKE %s",
                 f"%{ghost}%") == [(0,)]


def test_processes_export_metrics(procs: dict[str, Proc], catalog: Settings) -> None:
    import urllib.request

    from tests.pipelineutil import metrics_ports

    consumer_port, worker_port = metrics_ports(catalog)

    def scrape(port: int) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
            return str(resp.read().decode())

    consumer = wait_for(lambda: "brainstream_events_total" in (text := scrape(consumer_port))
                        and text, what="consumer metrics")
    assert 'brainstream_events_total{outcome="applied"}' in consumer
    assert "brainstream_consumer_lag{" in consumer
    assert "brainstream_consumer_batch_seconds_count" in consumer
    worker = wait_for(lambda: "brainstream_embed_batch_seconds_count" in (text := scrape(
        worker_port)) and text, what="worker metrics")
    assert "brainstream_embedding_rows{" in worker
    assert "brainstream_embed_batch_size_bucket" in worker


@pytest.mark.usefixtures("sql_postings")  # the vocabulary is kept with them
def test_sweep_brings_new_words_into_the_search_vocabulary(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    """The worker's periodic sweep moves the words of new text into the vocabulary that the
    trigram channel matches misspellings against."""
    ns = uuid.uuid4()
    event = put(ns, kind="note", title="Field notes", content="the axolotlphant was sighted")
    publisher.send(event, event["data"]["id"])
    wait_for(lambda: indexed(catalog, event["data"]["id"]), what="the put")
    wait_for(lambda: _rows(catalog, "SELECT count(*) FROM search_vocab WHERE namespace_id = %s"
                           " AND lexeme LIKE 'axolotl%%'", ns) == [(1,)],
             timeout=30, what="the new word in the vocabulary")
