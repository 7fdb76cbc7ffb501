"""Conversation memory in the entity layer, on the real stack, two tenants: a message's entities
are the namespace's entities (one entity for a name said in a chat and written in a document),
paths cross from a message to the documents about the same entity citing the message, memory
search answers with the namespace's documents beside its hits (`include_knowledge`), and
`/v1/resolve` grounds a whole passage. A conversation in namespace A never reaches B's rows; a
hidden message counts for nothing, a purged one leaves nothing."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from pipeline.entities.extractors import build_extractor
from pipeline.entities.stage import ExtractionStage
from pipeline.entities.store.merges import merge
from pipeline.ops.memory import purge_memory
from pipeline.postgres.plans import run
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.apiutil import ApiTenant as Tenant, ok
from tests.memory.memutil import add, message, send, session_put
from tests.memory.workutil import extracted, query
from tests.pipelineutil import Proc, Publisher, envelope, ingest, wait_for

pytestmark = pytest.mark.stack

DOC_TITLE = "Harbor Lights Foundation"
DOC_TEXT = "Caroline Reyes founded the Harbor Lights Foundation in Lisbon."
SAID = "Yesterday I had coffee with Caroline Reyes."
GONE = "Caroline Reyes called later about the gala."


def _world(publisher: Publisher, catalog: Settings, tenant: Tenant) -> dict[str, Any]:
    """One document and two sessions of the tenant (`gone` is deleted by a test)."""
    ns, doc = tenant.namespace, str(uuid.uuid4())
    ingest(catalog, [envelope("object.put", ns, {"id": doc, "kind": "note", "title": DOC_TITLE,
                                                 "content": DOC_TEXT})])
    said, gone = message(SAID), message(GONE)
    sid, gid = f"chat-{uuid.uuid4().hex[:6]}", f"gone-{uuid.uuid4().hex[:6]}"
    send(publisher, ns, sid, session_put(ns, sid, user_id="u-graph"), add(ns, sid, said))
    send(publisher, ns, gid, session_put(ns, gid, user_id="u-graph"), add(ns, gid, gone))
    return {"ns": ns, "doc": doc, "said": said["uuid"], "gone": gone["uuid"], "sid": sid,
            "gid": gid}


@pytest.fixture(scope="module")
def graph_worlds(procs: dict[str, Proc], catalog: Settings, mem_tenants: dict[str, Tenant]
                 ) -> dict[str, dict[str, Any]]:
    """The same document and conversations in both tenants; documents and messages
    extracted."""
    pub = Publisher(catalog)
    try:
        out = {name: _world(pub, catalog, t) for name, t in mem_tenants.items()}
    finally:
        pub.close()
    pool = make_pool(catalog, max_size=2)
    try:
        ExtractionStage(catalog, pool, build_extractor(catalog)).run(
            [uuid.UUID(w["doc"]) for w in out.values()])
    finally:
        pool.close()
    docs = [w["doc"] for w in out.values()]
    wait_for(lambda: query(catalog, "SELECT count(*) FROM entity_extraction WHERE status ="
                                    " 'done' AND row_id = ANY(%s::uuid[])", docs)[0][0] == 2,
             timeout=60, what="the documents extracted")
    said = [u for w in out.values() for u in (w["said"], w["gone"])]
    wait_for(lambda: extracted(catalog, said), timeout=60, what="the messages extracted")
    return out


def _entity_of_doc(catalog: Settings, doc: str, text: str) -> uuid.UUID:
    [(eid,)] = query(catalog, "SELECT DISTINCT m.entity_id FROM mentions m JOIN objects o"
                              " ON o.id = m.row_id WHERE coalesce(o.parent_id, o.id) = %s"
                              " AND m.text = %s", doc, text)
    return uuid.UUID(str(eid))


def _message_entities(catalog: Settings, ns: uuid.UUID, msg: str) -> dict[str, uuid.UUID]:
    return {str(text): uuid.UUID(str(eid)) for text, eid in query(
        catalog, "SELECT text, entity_id FROM message_mentions WHERE namespace_id = %s"
                 " AND message_uuid = %s", str(ns), msg)}


def test_a_name_said_and_written_is_one_entity_per_namespace(
        graph_worlds: dict[str, dict[str, Any]], catalog: Settings) -> None:
    a, b = graph_worlds["a"], graph_worlds["b"]
    person_a = _entity_of_doc(catalog, a["doc"], "Caroline Reyes")
    person_b = _entity_of_doc(catalog, b["doc"], "Caroline Reyes")
    assert person_a != person_b
    assert _message_entities(catalog, a["ns"], a["said"]) == {"Caroline Reyes": person_a}
    assert _message_entities(catalog, b["ns"], b["said"]) == {"Caroline Reyes": person_b}
    # messages do not count among the rows naming an entity (seed weights, hubs)
    [(count,)] = query(catalog, "SELECT part_count FROM entities WHERE id = %s", person_a)
    assert count == 1


def _paths(client: TestClient, tenant: Tenant, src: list[str], dst: list[str]) -> Any:
    return client.post("/v1/paths", headers=tenant.headers,
                       json={"from": src, "to": dst, "max_hops": 2, "k": 3})


def test_paths_cross_from_a_message_to_the_document_citing_it(
        mem_client: TestClient, mem_tenants: dict[str, Tenant],
        graph_worlds: dict[str, dict[str, Any]], catalog: Settings) -> None:
    a, b = graph_worlds["a"], graph_worlds["b"]
    ta, tb = mem_tenants["a"], mem_tenants["b"]
    found = ok(_paths(mem_client, ta, [a["said"]], [a["doc"]]))
    assert found["status"] == "found", found
    path = found["paths"][0]
    assert [n["type"] for n in path["nodes"]] == ["message", "entity", "object"]
    assert path["nodes"][0]["session_id"] == a["sid"] and path["nodes"][0]["title"] == SAID
    assert path["nodes"][1]["id"] == str(_entity_of_doc(catalog, a["doc"], "Caroline Reyes"))
    said, written = path["edges"]
    cite = said["evidence"][0]
    assert (cite["row_id"], cite["session_id"], cite["text"]) == (a["said"], a["sid"],
                                                                  "Caroline Reyes")
    assert SAID[cite["start"]:cite["end"]] == "Caroline Reyes" and "coffee" in cite["snippet"]
    assert written["evidence"][0]["object_id"] == a["doc"]
    # another tenant's message is unknown; a tenant's message never reaches another's document
    assert _paths(mem_client, tb, [a["said"]], [b["doc"]]).status_code == 404
    assert _paths(mem_client, tb, [b["said"]], [a["doc"]]).status_code == 404
    other = ok(_paths(mem_client, tb, [b["said"]], [b["doc"]]))["paths"][0]
    assert other["nodes"][1]["id"] == str(_entity_of_doc(catalog, b["doc"], "Caroline Reyes"))


def test_document_only_paths_do_not_walk_conversations(
        mem_client: TestClient, mem_tenants: dict[str, Tenant],
        graph_worlds: dict[str, dict[str, Any]], catalog: Settings) -> None:
    a = graph_worlds["a"]
    lisbon = _entity_of_doc(catalog, a["doc"], "Lisbon")
    person = _entity_of_doc(catalog, a["doc"], "Caroline Reyes")
    answer = ok(_paths(mem_client, mem_tenants["a"], [str(lisbon)], [str(person)]))
    assert answer["status"] == "found"
    assert all(n["type"] != "message" for p in answer["paths"] for n in p["nodes"])


def test_resolve_grounds_a_passage_per_tenant(
        mem_client: TestClient, mem_tenants: dict[str, Tenant],
        graph_worlds: dict[str, dict[str, Any]], catalog: Settings) -> None:
    text = "Did Caroline Reyes, of Harbor Lights Foundation fame, move to lisbon?"
    for name in ("a", "b"):
        w, t = graph_worlds[name], mem_tenants[name]
        answer = ok(mem_client.post("/v1/resolve", headers=t.headers, json={"text": text}))
        got = {e["name"]: e for e in answer["entities"]}
        assert answer["results"] == []
        person = got["Caroline Reyes"]
        assert person["entity_id"] == str(_entity_of_doc(catalog, w["doc"], "Caroline Reyes"))
        assert (person["method"], person["confidence"], person["ambiguous"]) == (
            "exact", 1.0, False)
        [span] = person["spans"]
        assert text[span["start"]:span["end"]] == span["text"] == "Caroline Reyes"
        # the longest match wins: the foundation, not "Harbor Lights" or a lone "Harbor"
        [org] = got["Harbor Lights Foundation"]["spans"]
        assert org["text"] == "Harbor Lights Foundation"
        # a lower-case single word never matches a capitalised name (as PPR's seeds)
        assert "Lisbon" not in got
    answer = ok(mem_client.post("/v1/resolve", headers=mem_tenants["a"].headers,
                                json={"text": text, "labels": ["ACRONYM"]}))
    assert answer["entities"] == []


@pytest.mark.parametrize("body,field", [
    ({"text": "Caroline Reyes", "query": "Caroline"}, "text"),
    ({"text": "x" * 20_001}, "text"),
    ({"text": "   "}, "text"),
    ({"limit": 3}, "query"),
])
def test_resolve_text_refusals_name_the_field(mem_client: TestClient,
                                              mem_tenants: dict[str, Tenant],
                                              body: dict[str, Any], field: str) -> None:
    r = mem_client.post("/v1/resolve", headers=mem_tenants["a"].headers, json=body)
    assert r.status_code == 422, r.text
    assert field in r.text


def test_memory_search_with_knowledge_keeps_the_two_apart(
        mem_client: TestClient, mem_tenants: dict[str, Tenant],
        graph_worlds: dict[str, dict[str, Any]]) -> None:
    for name in ("a", "b"):
        w, t = graph_worlds[name], mem_tenants[name]
        path = f"/v1/sessions/{w['sid']}/search"
        plain = ok(mem_client.post(path, headers=t.headers, json={"query": "Caroline Reyes"}))
        both = ok(mem_client.post(path, headers=t.headers, json={
            "query": "Caroline Reyes", "include_knowledge": True}))
        assert plain["knowledge"] is None
        assert both["results"] == plain["results"]
        assert [h["uuid"] for h in both["results"]] == [w["said"]]
        assert {h["source"] for h in both["results"]} == {"memory"}
        assert [o["id"] for o in both["knowledge"]] == [w["doc"]]
        assert both["knowledge"][0]["source"] == "knowledge"
        assert both["knowledge"][0]["evidence"], both["knowledge"][0]
        assert both["knowledge_degraded"] is None
        user = ok(mem_client.post("/v1/memory/search", headers=t.headers, json={
            "query": "Harbor Lights Foundation", "user_id": "u-graph",
            "include_knowledge": True}))
        assert [o["id"] for o in user["knowledge"]] == [w["doc"]]
        # a user with no sessions still gets the documents
        nobody = ok(mem_client.post("/v1/memory/search", headers=t.headers, json={
            "query": "Harbor Lights Foundation", "user_id": "nobody",
            "include_knowledge": True}))
        assert nobody["results"] == [] and [o["id"] for o in nobody["knowledge"]] == [w["doc"]]


def _walk(client: TestClient, tenant: Tenant, messages: list[str]) -> dict[str, Any]:
    return ok(client.post("/v1/search", headers=tenant.headers, json={
        "query": "coffee", "from_messages": messages, "explain": True, "limit": 5}))


def _message_seeds(answer: dict[str, Any]) -> list[str]:
    return [s["name"] for s in answer["explain"]["seeds"] if s["method"] == "message"]


def test_ppr_walks_from_a_message_to_the_documents_in_both_walks(
        mem_client: TestClient, mem_tenants: dict[str, Tenant],
        graph_worlds: dict[str, dict[str, Any]]) -> None:
    a, b = graph_worlds["a"], graph_worlds["b"]
    ta, tb = mem_tenants["a"], mem_tenants["b"]
    first = _walk(mem_client, ta, [a["said"]])
    assert first["mode"] == "ppr" and _message_seeds(first) == ["Caroline Reyes"]
    ranked = {h["id"]: h["ppr_rank"] for h in first["explain"]["hits"]}
    assert ranked[a["doc"]] == 1, first["explain"]
    # the snapshot walk (built in the background after the first search) answers the same
    later = wait_for(lambda: (x := _walk(mem_client, ta, [a["said"]]))["explain"][
        "walk_source"] == "snapshot" and x, timeout=60, what="the snapshot walk")
    assert first["explain"]["walk_source"] == "sql"
    assert [o["id"] for o in later["objects"]] == [o["id"] for o in first["objects"]]
    assert later["explain"]["hits"] == first["explain"]["hits"]
    # a message of another namespace seeds nothing there
    other = _walk(mem_client, tb, [a["said"]])
    assert _message_seeds(other) == [] and a["doc"] not in {o["id"] for o in other["objects"]}
    assert _message_seeds(_walk(mem_client, tb, [b["said"]])) == ["Caroline Reyes"]
    # without messages the search is the plain one
    plain = ok(mem_client.post("/v1/search", headers=ta.headers, json={"query": "coffee"}))
    assert plain["mode"] is None
    refused = mem_client.post("/v1/search", headers=ta.headers, json={
        "similar_to": a["doc"], "from_messages": [a["said"]]})
    assert refused.status_code == 422 and "from_messages" in refused.text


def test_a_deleted_conversation_counts_for_nothing_and_purge_leaves_nothing(
        procs: dict[str, Proc], mem_client: TestClient, mem_tenants: dict[str, Tenant],
        graph_worlds: dict[str, dict[str, Any]], catalog: Settings) -> None:
    a, ta = graph_worlds["a"], mem_tenants["a"]
    assert ok(_paths(mem_client, ta, [a["gone"]], [a["doc"]]))["status"] == "found"
    pub = Publisher(catalog)
    try:
        send(pub, a["ns"], a["gid"], envelope("session.delete", a["ns"],
                                              {"session_id": a["gid"]}))
    finally:
        pub.close()
    wait_for(lambda: query(catalog, "SELECT deleted_at FROM messages WHERE uuid = %s",
                           a["gone"])[0][0], timeout=30, what="the session deleted")
    assert _paths(mem_client, ta, [a["gone"]], [a["doc"]]).status_code == 404
    assert _message_seeds(_walk(mem_client, ta, [a["gone"]])) == []
    # from the entity, only the live message is reached
    person = str(_entity_of_doc(catalog, a["doc"], "Caroline Reyes"))
    reached = ok(mem_client.post("/v1/paths", headers=ta.headers, json={
        "from": [a["said"]], "to": [person], "max_hops": 1}))
    assert reached["status"] == "found"
    assert _message_entities(catalog, a["ns"], a["gone"])  # kept until purged
    purge_memory(catalog, timedelta(0))
    assert _message_entities(catalog, a["ns"], a["gone"]) == {}
    assert _message_entities(catalog, a["ns"], a["said"])


def test_a_merge_moves_a_conversations_mentions_to_the_survivor(
        mem_client: TestClient, mem_tenants: dict[str, Tenant],
        graph_worlds: dict[str, dict[str, Any]], catalog: Settings) -> None:
    b, tb = graph_worlds["b"], mem_tenants["b"]
    person = _entity_of_doc(catalog, b["doc"], "Caroline Reyes")
    survivor = _entity_of_doc(catalog, b["doc"], "Harbor Lights Foundation")
    with psycopg.connect(catalog.effective_postgres_dsn) as conn:
        run(conn, merge(b["ns"], person, survivor, confidence=1.0, method="manual",
                        decided_by="test", dry_run=False))
    assert _message_entities(catalog, b["ns"], b["said"]) == {"Caroline Reyes": survivor}
    path = ok(_paths(mem_client, tb, [b["said"]], [str(person)]))["paths"][0]
    assert [n["id"] for n in path["nodes"]] == [b["said"], str(survivor)]
