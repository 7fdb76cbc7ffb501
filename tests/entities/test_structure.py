"""Caller-supplied entities and relations on the real stack (Postgres, the stage in-process, the
API): they feed the entity layer without the extractor, their relations are RELATES edges cited
by paths and facts with valid and system time, a functional predicate gives one timeline in any
arrival order, a re-put retires what it no longer states, a bad structure is dead-lettered alone,
a second database rebuilt from the same records holds the same facts and ids, tenants apart."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
from fastapi.testclient import TestClient
from psycopg_pool import ConnectionPool

from pipeline.domain.chunking import chunk_text, part_id
from pipeline.entities.ids import entity_id
from pipeline.entities.stage import ExtractionStage
from pipeline.entities.store.merges import merge
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import RawRecord, ingest_options
from pipeline.ingest.store.events import PgEventStore
from pipeline.postgres.plans import run
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.apiutil import ApiTenant, api_client, ok
from tests.entities.stageutil import CapsExtractor, envelope, q
from tests.stackutil import fresh_database

FILLER = " ".join(["lorem"] * 180)
LEAD = "Jane Roe leads {org} since then."


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def company(ns: uuid.UUID, oid: uuid.UUID, org: str, *, since: str | None = None,
            relation: bool = True) -> dict[str, Any]:
    """A company whose content (cut into two parts) says Jane Roe leads it; the relation's span
    is that sentence."""
    lead = LEAD.format(org=org)
    content = f"{FILLER}\n\n{lead}\n\n{FILLER}"
    s = content.index(lead)
    data: dict[str, Any] = {
        "id": str(oid), "kind": "company", "title": org, "content": content,
        "entities": [
            {"name": org, "label": "ORG", "spans": [
                {"field": "title", "start": 0, "end": len(org)},
                {"field": "content", "start": s + 15, "end": s + 15 + len(org)}]},
            {"name": "Jane Roe", "label": "PERSON",
             "spans": [{"field": "content", "start": s, "end": s + 8}]}],
        "relations": [{"subject": "Jane Roe", "predicate": "ceo_of", "object": org,
                       "span": {"field": "content", "start": s, "end": s + len(lead)},
                       **({"valid_from": since} if since else {})}] if relation else []}
    return envelope("object.put", ns, data)


def apply_at(settings: Settings, timed: list[tuple[dict[str, Any], datetime]]) -> list[Any]:
    """The consumer's transaction over the events, each record stamped with its time; the
    dead letters."""
    records = [RawRecord("t", 0, i, None, json.dumps(e).encode(),
                         timestamp_ms=int(t.timestamp() * 1000))
               for i, (e, t) in enumerate(timed)]
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn, \
            conn.transaction():
        return apply_batch(PgEventStore(conn), records, ingest_options(settings)).dead


def functional(settings: Settings) -> None:
    q(settings, "INSERT INTO relation_types (relation_type, spec) VALUES ('ceo_of',"
      " '{\"functional\": true}') ON CONFLICT (relation_type) DO UPDATE SET spec ="
      " EXCLUDED.spec RETURNING 1")


def test_supplied_structure_feeds_the_entity_layer_without_the_extractor(
        edb: Settings, epool: ConnectionPool) -> None:
    ns, acme = uuid.uuid4(), uuid.uuid4()
    event = company(ns, acme, "Acme Corp", since="2020-01-01T00:00:00Z")
    assert apply_at(edb, [(event, at("2026-01-01T00:00:00"))]) == []
    extractor = CapsExtractor()
    stats = ExtractionStage(edb, epool, extractor).run([acme])  # type: ignore[arg-type]
    assert extractor.calls == [] and stats.extracted == 3 and stats.failed == 0
    content = event["data"]["content"]
    chunks = chunk_text(content, max_tokens=edb.chunk_max_tokens,
                        overlap_tokens=edb.chunk_overlap_tokens)
    assert len(chunks) == 2
    lead = part_id(ns, acme, 0)
    org, jane = entity_id(ns, "acme corp", "ORG"), entity_id(ns, "jane roe", "PERSON")
    found = {r[0]: r[1:] for r in q(edb, "SELECT id, name, label, part_count FROM entities"
                                    " WHERE namespace_id = %s", ns)}
    assert found == {org: ("Acme Corp", "ORG", 2), jane: ("Jane Roe", "PERSON", 1)}
    spans = q(edb, "SELECT row_id, field, text, entity_id FROM mentions WHERE namespace_id = %s"
              " ORDER BY row_id, start_pos", ns)
    assert sorted(spans) == sorted([(acme, "title", "Acme Corp", org),
                                    (lead, "content", "Jane Roe", jane),
                                    (lead, "content", "Acme Corp", org)])
    assert q(edb, "SELECT DISTINCT extractor FROM entity_extraction WHERE root_id = %s",
             acme) == [("supplied",)]
    relates = q(edb, "SELECT from_id, predicate, to_id, evidence FROM entity_edges"
                " WHERE namespace_id = %s AND edge_type = 'RELATES'", ns)
    assert relates == [(jane, "ceo_of", org, [lead])]
    facts = q(edb, "SELECT subject_id, predicate, object_id, row_id, valid_from, valid_to,"
              " recorded_at, invalidated_at FROM entity_facts WHERE namespace_id = %s", ns)
    assert facts == [(jane, "ceo_of", org, lead, at("2020-01-01T00:00:00"), None,
                      at("2026-01-01T00:00:00"), None)]


def test_a_structure_that_does_not_fit_is_dead_lettered_and_the_next_event_flows(
        edb: Settings) -> None:
    ns, bad, good = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    wrong = company(ns, bad, "Initech")
    wrong["data"]["relations"][0]["object"] = "Globex"  # no entity of this put
    dead = apply_at(edb, [(wrong, at("2026-01-01T00:00:00")),
                          (company(ns, good, "Umbrella"), at("2026-01-01T00:00:01"))])
    assert [(d.error.code, d.error.field) for d in dead] == [
        ("structure_invalid", "data.relations[0].object")]
    assert q(edb, "SELECT id FROM objects WHERE id = ANY(%s)", [bad, good]) == [(good,)]


def _world(settings: Settings, ns: uuid.UUID, acme: uuid.UUID, globex: uuid.UUID,
           order: list[str]) -> None:
    events = {"acme": company(ns, acme, "Acme Corp", since="2020-01-01T00:00:00Z"),
              "globex": company(ns, globex, "Globex", since="2023-01-01T00:00:00Z")}
    for n, name in enumerate(order):
        assert apply_at(settings, [(events[name], at(f"2026-01-0{n + 1}T00:00:00"))]) == []


def _facts(client: TestClient, key: str, entity: uuid.UUID, **params: str) -> list[Any]:
    answer = ok(client.get(f"/v1/entities/{entity}/facts", params=params,
                           headers={"Authorization": f"Bearer {key}"}))
    return [(f["object"]["name"], f["valid_from"], f["valid_to"]) for f in answer["facts"]]


def test_facts_over_time_in_any_order_as_known_then_and_tenants_apart(
        edb: Settings, epool: ConnectionPool) -> None:
    functional(edb)
    a, b = ApiTenant(uuid.uuid4(), f"key-a-{uuid.uuid4().hex[:8]}"), \
        ApiTenant(uuid.uuid4(), f"key-b-{uuid.uuid4().hex[:8]}")
    roots = {t.namespace: (uuid.uuid4(), uuid.uuid4()) for t in (a, b)}
    _world(edb, a.namespace, *roots[a.namespace], ["acme", "globex"])
    _world(edb, b.namespace, *roots[b.namespace], ["globex", "acme"])  # the other order
    ExtractionStage(edb, epool, CapsExtractor()).run(  # type: ignore[arg-type]
        [r for pair in roots.values() for r in pair])
    acme_ended = [("Acme Corp", "2020-01-01T00:00:00Z", "2023-01-01T00:00:00Z")]
    globex_now = [("Globex", "2023-01-01T00:00:00Z", None)]
    with api_client(edb, [a, b]) as client:
        for t in (a, b):
            jane = entity_id(t.namespace, "jane roe", "PERSON")
            # one timeline whatever the order the facts arrived in
            assert _facts(client, t.key, jane, as_of="2021-06-01T00:00:00Z") == acme_ended
            assert _facts(client, t.key, jane, as_of="2024-06-01T00:00:00Z") == globex_now
            assert _facts(client, t.key, jane) == globex_now
            assert _facts(client, t.key, jane, as_of="2019-06-01T00:00:00Z") == []
            # the object's side: who leads Globex
            org = entity_id(t.namespace, "globex", "ORG")
            assert [f[0] for f in _facts(client, t.key, org)] == ["Globex"]
        jane_a = entity_id(a.namespace, "jane roe", "PERSON")
        # as known on Jan 1st, before Globex was recorded: Acme still held in 2024
        assert _facts(client, a.key, jane_a, as_of="2024-06-01T00:00:00Z",
                      known_at="2026-01-01T12:00:00Z") == [
            ("Acme Corp", "2020-01-01T00:00:00Z", None)]
        assert _facts(client, a.key, jane_a, known_at="2025-01-01T00:00:00Z") == []
        # a tenant never reads another's entity
        jane_b = entity_id(b.namespace, "jane roe", "PERSON")
        assert client.get(f"/v1/entities/{jane_b}/facts",
                          headers={"Authorization": f"Bearer {a.key}"}).status_code == 404
        naive = client.get(f"/v1/entities/{jane_a}/facts", params={"as_of": "2024-01-01T00:00"},
                           headers={"Authorization": f"Bearer {a.key}"})
        assert naive.status_code == 422 and "as_of" in naive.text
        # paths cite the stating part like an extractor's relation
        path = ok(client.post("/v1/paths", json={
            "from": [str(jane_a)], "to": [str(entity_id(a.namespace, "acme corp", "ORG"))],
            "max_hops": 1}, headers={"Authorization": f"Bearer {a.key}"}))["paths"][0]
        edge = path["edges"][0]
        assert edge["type"] == "RELATES" and edge["predicate"] == "ceo_of"
        assert edge["evidence"][0]["row_id"] == str(part_id(a.namespace,
                                                            roots[a.namespace][0], 0))
        assert "Jane Roe leads Acme Corp" in edge["evidence"][0]["snippet"]

        # a PPR search walks the RELATES facts counting at (as_of, known_at); by default the
        # current edges (both relations stated)
        def walked_edges(**when: str) -> int:
            answer = ok(client.post("/v1/search", json={
                "query": "Jane Roe", "mode": "ppr", "explain": True, **when},
                headers={"Authorization": f"Bearer {a.key}"}))
            if when:
                assert answer["explain"]["walk_source"] == "sql"
            return int(answer["explain"]["subgraph"]["edges"])
        now = walked_edges()
        assert walked_edges(as_of="2024-06-01T00:00:00Z") == now - 1  # Acme's fact was cut
        assert walked_edges(as_of="2019-06-01T00:00:00Z") == now - 2  # neither held yet
        assert walked_edges(as_of="2024-06-01T00:00:00Z",
                            known_at="2025-06-01T00:00:00Z") == now - 2  # nothing known yet

        # Acme is put again without the relation: the fact is retired as of that put
        acme_a = roots[a.namespace][0]
        again = company(a.namespace, acme_a, "Acme Corp", relation=False)
        assert apply_at(edb, [(again, at("2026-01-05T00:00:00"))]) == []
        ExtractionStage(edb, epool, CapsExtractor()).run([acme_a])  # type: ignore[arg-type]
        assert _facts(client, a.key, jane_a, as_of="2021-06-01T00:00:00Z") == []
        assert _facts(client, a.key, jane_a, as_of="2021-06-01T00:00:00Z",
                      known_at="2026-01-04T00:00:00Z") == acme_ended
        retired = q(edb, "SELECT invalidated_at, invalidated_by FROM entity_facts"
                    " WHERE root_id = %s", acme_a)
        assert retired == [(at("2026-01-05T00:00:00"), again["id"])]
        assert q(edb, "SELECT count(*) FROM entity_edges WHERE namespace_id = %s"
                 " AND edge_type = 'RELATES' AND to_id = %s", a.namespace,
                 entity_id(a.namespace, "acme corp", "ORG")) == [(0,)]
        # B is untouched
        jane_b_facts = _facts(client, b.key, jane_b, as_of="2021-06-01T00:00:00Z")
        assert jane_b_facts == acme_ended


def _dump(settings: Settings, ns: uuid.UUID) -> list[tuple[Any, ...]]:
    return q(settings, "SELECT subject_id, predicate, object_id, row_id, valid_from, valid_to,"
             " recorded_at, recorded_by, invalidated_at, invalidated_by FROM entity_facts"
             " WHERE namespace_id = %s ORDER BY 1, 2, 3, 4, 7", ns)


def test_a_new_generation_holds_the_same_facts_and_entity_ids(
        edb: Settings, epool: ConnectionPool, stack_settings: Settings) -> None:
    functional(edb)
    ns, acme, globex = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    events = [(company(ns, acme, "Acme Corp", since="2020-01-01T00:00:00Z"),
               at("2026-02-01T00:00:00")),
              (company(ns, globex, "Globex", since="2023-01-01T00:00:00Z"),
               at("2026-02-02T00:00:00")),
              (company(ns, acme, "Acme Corp", relation=False), at("2026-02-03T00:00:00"))]
    # the first generation extracts between the puts, the second after all of them
    for event in events:
        assert apply_at(edb, [event]) == []
        ExtractionStage(edb, epool, CapsExtractor()).run([acme, globex])  # type: ignore[arg-type]
    second = fresh_database(stack_settings, "structure_gen", example_catalog=True)
    functional(second)
    assert apply_at(second, events) == []
    pool = make_pool(second, max_size=2)
    try:
        ExtractionStage(second, pool, CapsExtractor()).run([acme, globex])  # type: ignore[arg-type]
    finally:
        pool.close()
    first_facts = _dump(edb, ns)
    assert len(first_facts) == 2 and first_facts == _dump(second, ns)
    ids = "SELECT id, name, label FROM entities WHERE namespace_id = %s ORDER BY id"
    assert q(edb, ids, ns) == q(second, ids, ns)


def test_a_deleted_object_retires_its_facts_and_a_revival_states_them_again(
        edb: Settings, epool: ConnectionPool) -> None:
    ns, acme = uuid.uuid4(), uuid.uuid4()
    put = company(ns, acme, "Acme Corp", since="2020-01-01T00:00:00Z")
    assert apply_at(edb, [(put, at("2026-03-01T00:00:00"))]) == []
    ExtractionStage(edb, epool, CapsExtractor()).run([acme])  # type: ignore[arg-type]
    assert apply_at(edb, [(envelope("object.soft_delete", ns, {"id": str(acme)}),
                           at("2026-03-02T00:00:00"))]) == []
    revived = company(ns, acme, "Acme Corp", since="2020-01-01T00:00:00Z")
    assert apply_at(edb, [(revived, at("2026-03-03T00:00:00"))]) == []  # same text, same facts
    ExtractionStage(edb, epool, CapsExtractor()).run([acme])  # type: ignore[arg-type]
    jane = entity_id(ns, "jane roe", "PERSON")
    history = q(edb, "SELECT subject_id, recorded_at, invalidated_at FROM entity_facts"
                " WHERE root_id = %s ORDER BY recorded_at", acme)
    assert history == [(jane, at("2026-03-01T00:00:00"), at("2026-03-02T00:00:00")),
                       (jane, at("2026-03-03T00:00:00"), None)]


def test_a_merge_moves_the_merged_entitys_facts_to_the_survivor(
        edb: Settings, epool: ConnectionPool) -> None:
    """Two names of one company, each with its own fact: after a curator's merge the survivor
    answers both (the history's times kept), and the merged id answers as the survivor."""
    t = ApiTenant(uuid.uuid4(), f"key-m-{uuid.uuid4().hex[:8]}")
    acme, acme_inc = uuid.uuid4(), uuid.uuid4()
    assert apply_at(edb, [(company(t.namespace, acme, "Acme Corp", since="2020-01-01T00:00:00Z"),
                           at("2026-04-01T00:00:00")),
                          (company(t.namespace, acme_inc, "Acme Incorporated",
                                   since="2021-01-01T00:00:00Z"),
                           at("2026-04-02T00:00:00"))]) == []
    ExtractionStage(edb, epool, CapsExtractor()).run([acme, acme_inc])  # type: ignore[arg-type]
    into = entity_id(t.namespace, "acme corp", "ORG")
    gone = entity_id(t.namespace, "acme incorporated", "ORG")
    with psycopg.connect(edb.effective_postgres_dsn, autocommit=True) as conn, \
            conn.transaction():
        run(conn, merge(t.namespace, gone, into, confidence=1.0, method="manual",
                        decided_by="curator", dry_run=False))
    both = [("Acme Corp", "2020-01-01T00:00:00Z", None),
            ("Acme Corp", "2021-01-01T00:00:00Z", None)]
    with api_client(edb, [t]) as client:
        answer = ok(client.get(f"/v1/entities/{into}/facts",
                               headers={"Authorization": f"Bearer {t.key}"}))
        assert sorted((f["object"]["name"], f["valid_from"], f["valid_to"])
                      for f in answer["facts"]) == both
        assert {f["object"]["id"] for f in answer["facts"]} == {str(into)}
        assert sorted(_facts(client, t.key, gone)) == both
    recorded = q(edb, "SELECT object_id, recorded_at FROM entity_facts WHERE namespace_id = %s"
                 " ORDER BY recorded_at", t.namespace)
    assert recorded == [(into, at("2026-04-01T00:00:00")), (into, at("2026-04-02T00:00:00"))]
