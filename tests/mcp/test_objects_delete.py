"""`POST /v1/objects/delete` and `brainstream.objects.soft_delete` on the real stack with the
pipeline running, two tenants: a delete by source or filter is counted first (dry run), applied
by the consumer at its place in the log (later puts survive, a redelivered copy deletes nothing),
and its objects and their parts leave the search (the Tantivy index) and reads, in the caller's
namespace only."""

from __future__ import annotations

import uuid
from typing import Any

from click.testing import CliRunner
from fastapi.testclient import TestClient

from pipeline.cli import main
from pipeline.settings import Settings
from tests.apiutil import ApiTenant, api_client, ok
from tests.mcp.conftest import in_ledger
from tests.pipelineutil import Publisher, envelope, put, wait_for
from tests.stackutil import settings_env

SOURCE = "crm-import"


def _found(client: TestClient, tenant: ApiTenant, query: str) -> set[str]:
    """The tenant's objects holding the word (dense left out: the tenants are shared with the
    events tests, whose objects the dense channel would answer too)."""
    page = ok(client.post("/v1/search", json={"query": query, "limit": 50,
                                              "fusion": {"weights": {"dense": 0}}},
                          headers=tenant.headers))
    return {o["id"] for o in page["objects"]}


def _delete(client: TestClient, tenant: ApiTenant, **body: Any) -> Any:
    return client.post("/v1/objects/delete", json=body, headers=tenant.headers)


def _objects(namespace: uuid.UUID, word: str, n: int) -> list[dict[str, Any]]:
    """`n` put events of `SOURCE`: companies and a note long enough to be cut into parts, each
    holding `word` (the note only in its body)."""
    events = [envelope("object.put", namespace, {
        "id": str(uuid.uuid4()), "kind": "company", "title": f"{word} Holdings {i}",
        "properties": {"industry": "mining" if i % 2 else "textiles"}}, source=SOURCE)
        for i in range(n)]
    body = " ".join(f"Paragraph {i} of the minutes about budgets and hiring." for i in range(80))
    events.append(envelope("object.put", namespace, {
        "id": str(uuid.uuid4()), "kind": "note", "title": "Board minutes",
        "content": f"{body} The {word} contract closes the meeting."}, source=SOURCE))
    return events


def _send(settings: Settings, events: list[dict[str, Any]]) -> None:
    pub = Publisher(settings)
    try:
        pub.send_all((e, e["namespace"]) for e in events)  # one key: one partition, in order
    finally:
        pub.close()


def test_delete_by_source_and_by_filter_through_the_consumer(
        catalog: Settings, ev_client: TestClient, ev_tenants: dict[str, ApiTenant]) -> None:
    a, b = ev_tenants["a"], ev_tenants["b"]
    word = "Quokkaflux" + uuid.uuid4().hex[:6]
    mine, theirs = _objects(a.namespace, word, 4), _objects(b.namespace, word, 3)
    _send(catalog, mine + theirs)
    my_ids = {e["data"]["id"] for e in mine}
    their_ids = {e["data"]["id"] for e in theirs}
    wait_for(lambda: _found(ev_client, a, word) == my_ids
             and _found(ev_client, b, word) == their_ids, timeout=60,
             what="both tenants' objects to be searchable")

    # a dry run counts the caller's objects only, publishes nothing
    dry = ok(_delete(ev_client, a, source=SOURCE, filters={"industry": "mining"},
                     dry_run=True))
    mining = {e["data"]["id"] for e in mine if e["data"].get("properties", {})
              .get("industry") == "mining"}
    assert (dry["matched"], set(map(str, dry["sample_ids"])), dry["event_id"]) == \
        (len(mining), mining, None)
    assert ok(_delete(ev_client, b, source=SOURCE, dry_run=True))["matched"] == len(theirs)
    # the search's `where` selects as the equal filter does
    dry = ok(_delete(ev_client, a, where={"jsonpath": "$.industry", "eq": "mining"},
                     dry_run=True))
    assert set(map(str, dry["sample_ids"])) == mining

    # by filter (with the source): only A's mining companies go
    answer = ok(_delete(ev_client, a, source=SOURCE, filters={"industry": "mining"},
                        wait=True))
    assert (answer["status"], answer["matched"]) == ("applied", len(mining))
    wait_for(lambda: _found(ev_client, a, word) == my_ids - mining, timeout=60,
             what="the filtered objects to leave the lexical index")
    for object_id in mining:
        assert ev_client.get(f"/v1/objects/{object_id}", headers=a.headers).status_code == 404

    # by source: the rest of A's, the note's parts with it; B's objects of that source stay
    answer = ok(_delete(ev_client, a, source=SOURCE, wait=True))
    assert (answer["status"], answer["matched"]) == ("applied", len(my_ids - mining))
    wait_for(lambda: not _found(ev_client, a, word), timeout=60,
             what="the source's objects and parts to leave the lexical index")
    assert ok(ev_client.post("/v1/find_exact", json={"query": word},
                             headers=a.headers))["objects"] == []
    assert _found(ev_client, b, word) == their_ids
    assert ok(_delete(ev_client, b, source=SOURCE, dry_run=True))["matched"] == len(theirs)


def test_the_set_is_what_the_log_holds_before_the_event_and_a_copy_deletes_nothing(
        catalog: Settings, ev_client: TestClient, ev_tenants: dict[str, ApiTenant]) -> None:
    a = ev_tenants["a"]
    word = "Wombatrix" + uuid.uuid4().hex[:6]
    source = f"feed-{uuid.uuid4().hex[:6]}"
    before = {**put(a.namespace, title=f"{word} before"), "source": source}
    delete = envelope("objects.soft_delete", a.namespace, {"source": source}, source="ops")
    after = {**put(a.namespace, title=f"{word} after"), "source": source}
    _send(catalog, [before, delete, after])
    wait_for(lambda: in_ledger(catalog, a.namespace, after["id"]), timeout=60,
             what="the three events to be applied")
    alive = {after["data"]["id"]}
    wait_for(lambda: _found(ev_client, a, word) == alive, timeout=60,
             what="only the object put after the delete to be searchable")

    # the same delete again (a redelivery: same source and id) is a duplicate in the ledger
    _send(catalog, [delete, {**put(a.namespace, title=f"{word} marker"), "source": "ops"}])
    wait_for(lambda: len(_found(ev_client, a, word)) == 2, timeout=60,
             what="the marker to be searchable")
    assert after["data"]["id"] in _found(ev_client, a, word)


def test_bad_requests_name_the_field_and_a_read_key_cannot_delete(
        catalog: Settings, ev_client: TestClient, ev_tenants: dict[str, ApiTenant]) -> None:
    a = ev_tenants["a"]
    for body, field in (({}, "source"), ({"filters": {}}, "source"),
                        ({"all": True, "source": SOURCE}, "all"),
                        ({"filters": {"no_such_field": 1}}, "filters.no_such_field"),
                        ({"filters": {"kind": "no_such_kind"}}, "kind"),
                        ({"where": {"and": []}}, "where.and"),
                        ({"where": {"jsonpath": "$.industry", "gt": 5}}, "where.gt"),
                        ({"all": True, "where": {"jsonpath": "$.industry", "exists": True}},
                         "all")):
        response = _delete(ev_client, a, **body, dry_run=True)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["field"] == field, (body, response.text)
    # `all` alone is asked for by name: it is counted like any other delete
    assert ok(_delete(ev_client, a, all=True, dry_run=True))["matched"] >= 0
    with api_client(catalog, [a], "read") as reader:
        refused = reader.post("/v1/objects/delete", json={"source": SOURCE, "dry_run": True},
                              headers=a.headers)
    assert refused.status_code == 403, refused.text


def test_the_operators_command_counts_then_publishes_the_event(
        catalog: Settings, ev_client: TestClient, ev_tenants: dict[str, ApiTenant]) -> None:
    a, b = ev_tenants["a"], ev_tenants["b"]
    source = f"cli-{uuid.uuid4().hex[:6]}"
    mine, theirs = ({**put(t.namespace, title="Operator's target"), "source": source}
                    for t in (a, b))
    _send(catalog, [mine, theirs])
    wait_for(lambda: in_ledger(catalog, b.namespace, theirs["id"])
             and in_ledger(catalog, a.namespace, mine["id"]), timeout=60,
             what="both puts to be applied")
    runner = CliRunner(env=settings_env(catalog))
    command = ["delete", "--namespace", str(a.namespace), "--source", source]
    counted = runner.invoke(main, [*command, "--dry-run"])
    assert counted.exit_code == 0, counted.output
    assert "1 object(s) match now" in counted.output
    assert mine["data"]["id"] in counted.output and theirs["data"]["id"] not in counted.output
    published = runner.invoke(main, command)
    assert published.exit_code == 0, published.output
    wait_for(lambda: ev_client.get(f"/v1/objects/{mine['data']['id']}",
                                   headers=a.headers).status_code == 404, timeout=60,
             what="the operator's delete to be applied")
    assert ok(ev_client.get(f"/v1/objects/{theirs['data']['id']}", headers=b.headers))
    refused = runner.invoke(main, ["delete", "--namespace", str(a.namespace)])
    assert refused.exit_code == 2 and "source" in refused.output, refused.output
