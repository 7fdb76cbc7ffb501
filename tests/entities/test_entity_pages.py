"""Entity pages and the curator's queue on the real stack, two tenants: an entity's labels,
counts and neighbours, its mentions paged by a cursor, entity search through the resolver's
layers, the POSSIBLY_SAME pairs with their evidence, and the `defer` decision (an event, applied
like the others, so a replay applies it again before the pair is proposed).

The entities, mentions and edges are written by hand into objects the tests put (the tenants'
extraction is held: `hold_extraction`), so every expected figure is known."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from pipeline.entities.decisions import record_and_apply
from pipeline.entities.names import normalise
from pipeline.entities.store import merges
from pipeline.postgres.plans import run
from pipeline.settings import Settings
from tests.entities.conftest import Tenant
from tests.entities.holdutil import hold_extraction
from tests.pipelineutil import ingest, put

pytestmark = pytest.mark.stack

DOCS = {
    "first": "Ada Lovelace worked with Charles Babbage on the Analytical Engine in London.",
    "second": "Years later, Lovelace wrote the notes. Babbage never finished it.",
    "part": "A part: Lovelace again, and the Analytical Engine.",
    "gone": "Lovelace in a deleted object.",
}


def _entity(conn: psycopg.Connection[Any], t: Tenant, name: str, label: str = "PERSON",
            aliases: tuple[str, ...] = ()) -> uuid.UUID:
    entity_id = uuid.uuid4()
    conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label, part_count)"
                 " VALUES (%s, %s, %s, %s, %s, 1)",
                 (entity_id, t.namespace, name, normalise(name), label))
    conn.execute("DELETE FROM entity_proposal_queue WHERE entity_id = %s", (entity_id,))
    for alias in aliases:
        conn.execute("INSERT INTO entity_aliases (namespace_id, norm, alias, entity_id, source)"
                     " VALUES (%s, %s, %s, %s, 'surface')",
                     (t.namespace, normalise(alias), alias, entity_id))
    t.entities[name] = entity_id
    return entity_id


def _mention(conn: psycopg.Connection[Any], t: Tenant, row: str, text: str, entity: str,
             word: str, label: str = "PERSON") -> None:
    start = text.index(word)
    conn.execute("INSERT INTO mentions (row_id, field, start_pos, end_pos, namespace_id,"
                 " entity_id, label, text) VALUES (%s, 'content', %s, %s, %s, %s, %s, %s)",
                 (row, start, start + len(word), t.namespace, t.entities[entity], label, word))


def _edge(conn: psycopg.Connection[Any], t: Tenant, a: str, b: str, edge_type: str,
          weight: float, *, predicate: str = "", status: str | None = None,
          confidence: float | None = None, method: str | None = None,
          ordered: bool = True) -> None:
    x, y = t.entities[a], t.entities[b]
    if ordered:
        x, y = merges.ordered(x, y)
    conn.execute("INSERT INTO entity_edges (namespace_id, from_id, to_id, edge_type, predicate,"
                 " weight, status, confidence, method) VALUES (%s, %s, %s, %s, %s, %s, %s, %s,"
                 " %s)", (t.namespace, x, y, edge_type, predicate, weight, status, confidence,
                          method))


@pytest.fixture(scope="module")
def world(catalog: Settings, tenants: dict[str, Tenant],
          base_db: psycopg.Connection[Any]) -> dict[str, Tenant]:
    """Tenant A: Ada Lovelace named in two objects and a part (and in a deleted object), with
    neighbours, and two held pairs; tenant B: its own Ada Lovelace and a held pair."""
    a, b = tenants["a"], tenants["b"]
    rows: dict[str, str] = {}
    for t in (a, b):
        ids = {k: str(uuid.uuid4()) for k in DOCS}
        events = [put(t.namespace, id=ids[k], kind="note", title=f"{k} of {t.key[:5]}",
                      content=DOCS[k]) for k in ("first", "second", "gone")]
        events.append(put(t.namespace, id=ids["part"], kind="note", parent_id=ids["first"],
                          position=0, title=None, content=DOCS["part"]))
        ingest(catalog, events)
        hold_extraction(catalog, t.namespace)
        if t is a:
            rows = ids
    conn = base_db
    _entity(conn, a, "Ada Lovelace", aliases=("Lovelace",))
    _entity(conn, a, "Charles Babbage", aliases=("Babbage",))
    _entity(conn, a, "Analytical Engine", label="NAME")
    _entity(conn, a, "Augusta Ada King")
    _entity(conn, a, "Ada Lovelance", label="NAME")
    for row, word, label in (("first", "Ada Lovelace", "PERSON"), ("second", "Lovelace", "NAME"),
                             ("part", "Lovelace", "NAME"), ("gone", "Lovelace", "NAME")):
        _mention(conn, a, rows[row], DOCS[row], "Ada Lovelace", word, label)
    _mention(conn, a, rows["first"], DOCS["first"], "Charles Babbage", "Charles Babbage")
    _mention(conn, a, rows["second"], DOCS["second"], "Charles Babbage", "Babbage")
    _mention(conn, a, rows["part"], DOCS["part"], "Analytical Engine", "Analytical Engine", "NAME")
    _mention(conn, a, rows["second"], DOCS["second"], "Augusta Ada King", "notes")
    _mention(conn, a, rows["first"], DOCS["first"], "Ada Lovelance", "London", "NAME")
    _edge(conn, a, "Ada Lovelace", "Charles Babbage", "CO_OCCURS", 2)
    _edge(conn, a, "Ada Lovelace", "Analytical Engine", "CO_OCCURS", 1)
    _edge(conn, a, "Ada Lovelace", "Charles Babbage", "RELATES", 1, predicate="worked_with",
          ordered=False)
    _edge(conn, a, "Augusta Ada King", "Charles Babbage", "CO_OCCURS", 1)
    _edge(conn, a, "Ada Lovelace", "Augusta Ada King", "POSSIBLY_SAME", 0.8, status="held",
          confidence=0.8, method="embedding")
    _edge(conn, a, "Ada Lovelace", "Ada Lovelance", "POSSIBLY_SAME", 0.9, status="held",
          confidence=0.9, method="spelling")
    conn.execute("UPDATE objects SET deleted_at = now() WHERE id = %s", (rows["gone"],))
    _entity(conn, b, "Ada Lovelace")
    _entity(conn, b, "Ada King")
    for name in ("Ada Lovelace", "Ada King"):
        conn.execute("INSERT INTO mentions (row_id, field, start_pos, end_pos, namespace_id,"
                     " entity_id, label, text) VALUES (%s, 'title', 0, 3, %s, %s, 'PERSON', %s)",
                     (b.notes[0] if name == "Ada King" else b.notes[1], b.namespace,
                      b.entities[name], name[:3]))
    _edge(conn, b, "Ada Lovelace", "Ada King", "POSSIBLY_SAME", 0.77, status="held",
          confidence=0.77, method="prefix")
    a.notes = [rows["first"], rows["second"]]
    return tenants


def _get(client: TestClient, t: Tenant, path: str, **params: Any) -> Any:
    answer = client.get(path, headers=t.headers, params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_an_entity_page_counts_labels_and_neighbours(client: TestClient,
                                                     world: dict[str, Tenant]) -> None:
    a, b = world["a"], world["b"]
    ada = _get(client, a, f"/v1/entities/{a.entities['Ada Lovelace']}")
    # four mentions written, one in a deleted object: three count, in two objects (a part's
    # mention counts for its object)
    assert ada["mention_count"] == 3 and ada["object_count"] == 2
    assert ada["labels"] == [{"label": "NAME", "count": 2}, {"label": "PERSON", "count": 1}]
    assert [(n["name"], n["edge_type"], n.get("predicate"), n.get("direction"), n["weight"])
            for n in ada["neighbours"]] == [
        ("Charles Babbage", "CO_OCCURS", None, None, 2.0),
        ("Analytical Engine", "CO_OCCURS", None, None, 1.0),
        ("Charles Babbage", "RELATES", "worked_with", "out", 1.0)]
    babbage = _get(client, a, f"/v1/entities/{a.entities['Charles Babbage']}")
    assert ("Ada Lovelace", "RELATES", "in") in {
        (n["name"], n["edge_type"], n.get("direction")) for n in babbage["neighbours"]}
    # B's Ada is B's: its own counts, and A's id is not found with B's key
    theirs = _get(client, b, f"/v1/entities/{b.entities['Ada Lovelace']}")
    assert theirs["mention_count"] == 1 and theirs["neighbours"] == []
    for path in (f"/v1/entities/{a.entities['Ada Lovelace']}",
                 f"/v1/entities/{a.entities['Ada Lovelace']}/mentions"):
        other = client.get(path, headers=b.headers)
        assert other.status_code == 404, other.text


def test_mentions_page_by_a_cursor_with_snippets(client: TestClient,
                                                  world: dict[str, Tenant]) -> None:
    a = world["a"]
    path = f"/v1/entities/{a.entities['Ada Lovelace']}/mentions"
    whole = _get(client, a, path, limit=100)
    assert whole["cursor"] is None and len(whole["mentions"]) == 3
    texts = {m["row_id"]: m for m in whole["mentions"]}
    for m in whole["mentions"]:
        snip = m["snippet"]
        assert snip["text"][snip["start"]:snip["end"]] == m["text"]
        assert m["field"] == "content" and m["title"] is not None  # a part: its object's title
    assert sorted(m["object_id"] for m in whole["mentions"]) == sorted(
        [a.notes[0], a.notes[0], a.notes[1]])
    paged, cursor = [], None
    while True:
        page = _get(client, a, path, limit=1, **({"cursor": cursor} if cursor else {}))
        paged += page["mentions"]
        cursor = page["cursor"]
        if cursor is None:
            break
    assert paged == whole["mentions"] and set(texts) == {m["row_id"] for m in paged}
    bad = client.get(path, headers=a.headers, params={"cursor": "bm90IGEgY3Vyc29y"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "cursor"


def test_entity_search_ranks_by_the_resolvers_layers(client: TestClient,
                                                     world: dict[str, Tenant]) -> None:
    a, b = world["a"], world["b"]

    def search(t: Tenant, **body: Any) -> list[tuple[str, str]]:
        answer = client.post("/v1/entities/search", headers=t.headers, json=body)
        assert answer.status_code == 200, answer.text
        return [(h["name"], h["method"]) for h in answer.json()["entities"]]

    assert search(a, query="ada lovelace")[0] == ("Ada Lovelace", "exact")
    assert search(a, query="Babbage")[0] == ("Charles Babbage", "alias")
    assert search(a, query="Charles Babage")[0] == ("Charles Babbage", "spelling")
    assert all(name != "Ada Lovelance" for name, _ in
               search(a, query="ada lovelace", labels=["PERSON"]))
    assert ("Ada Lovelace", "exact") not in search(a, query="ada lovelace", labels=["ORG"])
    # B finds B's entity, never A's
    hits = client.post("/v1/entities/search", headers=b.headers,
                       json={"query": "ada lovelace"}).json()["entities"]
    assert [h["entity_id"] for h in hits][:1] == [str(b.entities["Ada Lovelace"])]
    assert not {h["entity_id"] for h in hits} & {str(x) for x in a.entities.values()}
    bad = client.post("/v1/entities/search", headers=a.headers, json={"query": " "})
    assert bad.status_code == 422


def test_the_curators_queue_shows_evidence_and_defers(client: TestClient,
                                                       world: dict[str, Tenant],
                                                       base_db: psycopg.Connection[Any]) -> None:
    a, b = world["a"], world["b"]
    held = _get(client, a, "/v1/entities/possibly_same", status="held")
    assert [(p["from"]["name"], p["to"]["name"]) for p in held["pairs"]] == [
        tuple(sorted(("Ada Lovelace", "Ada Lovelance"), key=lambda n: a.entities[n].bytes)),
        tuple(sorted(("Ada Lovelace", "Augusta Ada King"),
                     key=lambda n: a.entities[n].bytes))]  # most confident first
    king = held["pairs"][1]
    ends = {king["from"]["name"]: king["from"], king["to"]["name"]: king["to"]}
    assert king["confidence"] == pytest.approx(0.8) and king["method"] == "embedding"
    assert ends["Ada Lovelace"]["aliases"] == ["Lovelace"]
    assert [s["name"] for s in king["shared_neighbours"]] == ["Charles Babbage"]
    assert {c["text"] for c in ends["Ada Lovelace"]["contexts"]} == {"Ada Lovelace", "Lovelace"}
    assert all(c["snippet"]["text"][c["snippet"]["start"]:c["snippet"]["end"]] == c["text"]
               for c in ends["Augusta Ada King"]["contexts"])
    # paged one pair at a time, the same pairs
    first = _get(client, a, "/v1/entities/possibly_same", limit=1)
    second = _get(client, a, "/v1/entities/possibly_same", limit=1, cursor=first["cursor"])
    assert first["pairs"] + second["pairs"] == held["pairs"] and second["cursor"] is None
    # B sees its own pair only
    assert [(p["from"]["name"], p["to"]["name"]) in {("Ada Lovelace", "Ada King"),
                                                    ("Ada King", "Ada Lovelace")}
            for p in _get(client, b, "/v1/entities/possibly_same")["pairs"]] == [True]

    pair = f"/v1/entities/possibly_same/{a.entities['Ada Lovelace']}/" \
           f"{a.entities['Augusta Ada King']}"
    refused = client.post(pair, headers=a.headers, json={"decision": "defer"})
    assert refused.status_code == 403, refused.text
    other = client.post(pair, headers=b.curator, json={"decision": "defer"})
    assert other.status_code == 404, other.text
    deferred = client.post(pair, headers=a.curator, json={"decision": "defer"})
    assert deferred.status_code == 200, deferred.text
    assert deferred.json()["status"] == "deferred" and deferred.json()["merge"] is None
    assert [p["to"]["name"] for p in _get(client, a, "/v1/entities/possibly_same")["pairs"]
            ] == [held["pairs"][0]["to"]["name"]]
    later = _get(client, a, "/v1/entities/possibly_same", status="deferred")["pairs"]
    assert [(p["from"]["id"], p["to"]["id"], p["confidence"]) for p in later] == [
        (king["from"]["id"], king["to"]["id"], king["confidence"])]
    assert base_db.execute("SELECT decision, status FROM entity_decisions WHERE namespace_id"
                           " = %s", (a.namespace,)).fetchall() == [("defer", "applied")]
    # still decidable: verified, it merges and leaves the deferred list
    verified = client.post(pair, headers=a.curator, json={"decision": "verify"})
    assert verified.status_code == 200 and verified.json()["status"] == "verified"
    assert _get(client, a, "/v1/entities/possibly_same", status="deferred")["pairs"] == []


def test_a_defer_before_its_pair_is_proposed_keeps_the_pair_out_of_the_queue(
        world: dict[str, Tenant], base_db: psycopg.Connection[Any]) -> None:
    """What a replay does: decisions are applied after extraction and before the proposal
    pass, so a defer meets no pair; the pass then holds it with its confidence, deferred."""
    b = world["b"]
    one, two = (_entity(base_db, b, name) for name in ("Grace Hopper", "Grace Brewster Hopper"))
    done = run(base_db, record_and_apply(b.namespace, "api:test", str(uuid.uuid4()), "defer",
                                         one, two, "curator", None))
    assert done.status == "applied"
    assert run(base_db, merges.pair_status(b.namespace, one, two)) == "deferred"
    assert run(base_db, merges.hold(b.namespace, one, two, confidence=0.85, method="prefix"))
    low, high = merges.ordered(one, two)
    assert base_db.execute("SELECT status, confidence, method FROM entity_edges WHERE from_id ="
                           " %s AND to_id = %s", (low, high)).fetchall() == [
        ("deferred", pytest.approx(0.85), "prefix")]
    # a decided pair stays decided: a later defer does not reopen a refusal
    run(base_db, merges.decide(b.namespace, one, two, "refused"))
    run(base_db, merges.defer(b.namespace, one, two))
    assert run(base_db, merges.pair_status(b.namespace, one, two)) == "refused"


def test_the_review_cli_lists_and_decides_through_events(
        catalog: Settings, world: dict[str, Tenant],
        base_db: psycopg.Connection[Any]) -> None:
    from click.testing import CliRunner

    from pipeline.cli import main

    b = world["b"]

    def cli(*args: str, stdin: str = "") -> str:
        done = CliRunner().invoke(main, ["entities", "review", "--namespace", str(b.namespace),
                                         *args], input=stdin, obj={"settings": catalog},
                                  catch_exceptions=False)
        assert done.exit_code == 0, done.output
        return done.output

    listed = [json.loads(line) for line in cli("--json").splitlines()]
    assert [(p["from"]["name"], p["to"]["name"], p["status"]) for p in listed] == [
        (*sorted(("Ada Lovelace", "Ada King"), key=lambda n: b.entities[n].bytes), "held")]
    # skip, then quit: nothing decided
    shown = cli("--by", "tester", stdin="s\n")
    assert "Ada King" in shown and "confidence 0.77 (prefix)" in shown
    assert [p["status"] for p in map(json.loads, cli("--json").splitlines())] == ["held"]
    # defer: an event of the curator's, applied at once; the pair moves to the deferred list
    decided = cli("--by", "tester", stdin="d\n")
    assert "deferred" in decided
    assert cli("--json") == ""
    assert [p["to"]["id"] for p in map(json.loads, cli("--status", "deferred", "--json")
                                       .splitlines())] == [listed[0]["to"]["id"]]
    assert base_db.execute("SELECT decision, decided_by, status FROM entity_decisions"
                           " WHERE namespace_id = %s AND source = 'cli:tester'",
                           (b.namespace,)).fetchall() == [("defer", "tester", "applied")]
    # an answer the prompt does not know is asked again; quit leaves the pair deferred
    assert "Error" in cli("--status", "deferred", stdin="x\nq\n")
