"""`POST /v1/events` (issue 15 item 1; the contract in docs/operations.md): events published as
the caller, validated before anything is sent, waited for until the pipeline applied them."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.testclient import TestClient

from pipeline.access import shorthand_name
from pipeline.settings import Settings
from tests.apiutil import ApiTenant, api_client, ok
from tests.mcp.conftest import EVENTS_MAX, in_ledger
from tests.pipelineutil import wait_for


def _event(event_type: str, data: Any) -> dict[str, Any]:
    """An event with its own id (the API requires one, or an Idempotency-Key)."""
    return {"type": event_type, "id": str(uuid.uuid4()), "data": data}


def _put(**data: Any) -> dict[str, Any]:
    data.setdefault("id", str(uuid.uuid4()))
    data.setdefault("kind", "company")
    data.setdefault("title", f"Company {data['id'][:8]}")
    return _event("brainstream.object.put", data)


def _error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


def test_wait_answers_200_applied_and_only_the_caller_reads_it(
        ev_client: TestClient, ev_tenants: dict[str, ApiTenant]) -> None:
    a, b = ev_tenants["a"], ev_tenants["b"]
    company, deal = str(uuid.uuid4()), str(uuid.uuid4())
    body = {"events": [
        _put(id=company, title="Zephyr Looms", properties={"industry": "textiles"}),
        _put(id=deal, kind="deal", title="Zephyr loom upgrade",
             properties={"stage": "prospect"}),
        _event("brainstream.link.put", {"from": deal, "to": company, "relation_type": "buyer"}),
    ], "wait": True}
    answer = ok(ev_client.post("/v1/events", json=body, headers=a.headers))
    assert [e["type"] for e in answer["events"]] == [
        "brainstream.object.put", "brainstream.object.put", "brainstream.link.put"]
    assert {e["status"] for e in answer["events"]} == {"applied"}
    assert all(uuid.UUID(e["event_id"]).version == 4 for e in answer["events"])
    assert ok(ev_client.get(f"/v1/objects/{company}", headers=a.headers))["title"] == \
        "Zephyr Looms"
    # the other tenant sees nothing of it
    assert ev_client.get(f"/v1/objects/{company}", headers=b.headers).status_code == 404
    found = ok(ev_client.post("/v1/find_exact", json={"query": "Zephyr Looms"},
                              headers=b.headers))
    assert found["objects"] == []


def test_without_wait_answers_202_accepted_with_the_given_id(
        catalog: Settings, ev_client: TestClient, ev_tenants: dict[str, ApiTenant]) -> None:
    a = ev_tenants["a"]
    event = {**_put(title="Quill Harbour"), "id": "evt-given-" + uuid.uuid4().hex,
             "source": f"api:{shorthand_name(a.key)}", "namespace": str(a.namespace)}
    response = ev_client.post("/v1/events", json={"events": [event]}, headers=a.headers)
    assert response.status_code == 202, response.text
    assert response.json() == {"events": [{"event_id": event["id"],
                                           "type": "brainstream.object.put",
                                           "status": "accepted"}]}
    wait_for(lambda: in_ledger(catalog, a.namespace, event["id"]), timeout=30,
             what="the accepted event to be applied")


def test_one_invalid_event_refuses_the_request_and_publishes_nothing(
        catalog: Settings, ev_client: TestClient, ev_tenants: dict[str, ApiTenant]) -> None:
    a = ev_tenants["a"]
    good_id, good_event = str(uuid.uuid4()), "evt-refused-" + uuid.uuid4().hex
    body = {"events": [{**_put(id=good_id, title="Refused along"), "id": good_event},
                       _put(kind="no_such_kind")]}
    error = _error(ev_client.post("/v1/events", json=body, headers=a.headers), 422)
    assert error["field"] == "events.1.data.kind"
    assert error["code"] == "unknown_kind"
    for bad, field in (
            (_event("brainstream.object.put", {"kind": "deal", "title": "no stage"}),
             "events.0.data.properties.stage"),
            (_event("brainstream.messages.add", {"session_id": "s", "messages": []}),
             "events.0.type"),
            (_event("brainstream.link.put", {"from": "x"}), "events.0.data.from"),
            ("not an object", "events.0")):
        refused = ev_client.post("/v1/events", json={"events": [bad]}, headers=a.headers)
        assert _error(refused, 422)["field"] == field
    # a later put of the same object (so the same partition) is applied: had the refused
    # request sent its good event, the consumer would have applied that one first
    marker = _put(id=good_id, title="Marker after the refusal")
    ok(ev_client.post("/v1/events", json={"events": [marker], "wait": True},
                      headers=a.headers))
    assert not in_ledger(catalog, a.namespace, good_event)


def test_another_namespace_is_forbidden_and_nothing_is_published(
        catalog: Settings, ev_client: TestClient, ev_tenants: dict[str, ApiTenant]) -> None:
    a, b = ev_tenants["a"], ev_tenants["b"]
    target, event_id = str(uuid.uuid4()), "evt-foreign-" + uuid.uuid4().hex
    body = {"events": [_put(title="Mine"),
                       {**_put(id=target, title="Into B"), "id": event_id,
                        "namespace": str(b.namespace)}]}
    error = _error(ev_client.post("/v1/events", json=body, headers=a.headers), 403)
    assert (error["code"], error["field"]) == ("namespace_forbidden", "events.1.namespace")
    marker = _put(id=target, title="B's own object")
    ok(ev_client.post("/v1/events", json={"events": [marker], "wait": True},
                      headers=b.headers))
    assert not in_ledger(catalog, b.namespace, event_id)
    assert ok(ev_client.get(f"/v1/objects/{target}", headers=b.headers))["title"] == \
        "B's own object"


def test_too_many_events_is_422_naming_events(
        ev_client: TestClient, ev_tenants: dict[str, ApiTenant]) -> None:
    a = ev_tenants["a"]
    body = {"events": [_put() for _ in range(EVENTS_MAX + 1)]}
    assert _error(ev_client.post("/v1/events", json=body, headers=a.headers), 422)["field"] \
        == "events"
    assert _error(ev_client.post("/v1/events", json={"events": []}, headers=a.headers),
                  422)["field"] == "events"
    assert ev_client.post("/v1/events", json={"events": [_put()]}).status_code == 401


def test_an_event_the_pipeline_refuses_stays_accepted_past_the_wait(
        catalog: Settings, ev_client: TestClient, ev_tenants: dict[str, ApiTenant]) -> None:
    a, b = ev_tenants["a"], ev_tenants["b"]
    theirs = str(uuid.uuid4())
    ok(ev_client.post("/v1/events", json={"events": [_put(id=theirs, title="B keeps this")],
                                          "wait": True}, headers=b.headers))
    # valid to the schemas and the catalog, but the id is B's: the consumer dead-letters it
    with api_client(catalog, ev_tenants.values(), "write", memory_write_wait=1.0) as short:
        response = short.post("/v1/events", json={"events": [
            _put(title="A's fine one"), _put(id=theirs, title="A takes B's id")],
            "wait": True}, headers=a.headers)
    assert response.status_code == 202, response.text
    statuses = [e["status"] for e in response.json()["events"]]
    assert statuses[1] == "accepted"
    assert ok(ev_client.get(f"/v1/objects/{theirs}", headers=b.headers))["title"] == \
        "B keeps this"
