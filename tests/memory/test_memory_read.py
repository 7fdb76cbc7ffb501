"""Issue 12, item 4 (the non-search reads and the write-through): sessions, a user's sessions,
a session's memory with and without `lastn` and its summary lag, messages by page, deleted
sessions absent, bad requests refused naming the field, and POST messages published as an event
(read-your-writes with `wait`). Two tenants with sessions of the same names everywhere.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from pipeline.settings import Settings
from tests.apiutil import api_client
from tests.memory.conftest import Tenant
from tests.memory.memutil import add, message, session_put
from tests.memory.workutil import worker_paused
from tests.pipelineutil import Proc, envelope, ingest

pytestmark = pytest.mark.stack


def _conversation(ns: uuid.UUID, sid: str, n: int, *, user: str | None = None
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(events, messages): a session of `n` messages, added 5 at a time."""
    msgs = [message(f"{sid} turn {i + 1}", role="user" if i % 2 == 0 else "assistant")
            for i in range(n)]
    events = [session_put(ns, sid, user_id=user)] if user else []
    events += [add(ns, sid, *msgs[i:i + 5]) for i in range(0, n, 5)]
    return events, msgs


def _contents(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"]]


def test_sessions_of_a_user_paged_per_tenant(mem_client: TestClient, catalog: Settings,
                                             mem_tenants: dict[str, Tenant]) -> None:
    a, b = mem_tenants["a"], mem_tenants["b"]
    events = []
    for sid, user in (("u1-s1", "u1"), ("u1-s2", "u1"), ("u2-s1", "u2")):
        events += _conversation(a.namespace, sid, 1, user=user)[0]
    events += _conversation(b.namespace, "u1-s1", 1, user="u1")[0]
    events += _conversation(b.namespace, "b-only", 1, user="u1")[0]
    ingest(catalog, events)

    page = mem_client.get("/v1/sessions", params={"user_id": "u1", "limit": 1},
                          headers=a.headers).json()
    assert [s["session_id"] for s in page["sessions"]] == ["u1-s1"]
    rest = mem_client.get("/v1/sessions", params={"user_id": "u1",
                                                  "after": page["next_after"]},
                          headers=a.headers).json()
    assert [s["session_id"] for s in rest["sessions"]] == ["u1-s2"]
    assert rest["next_after"] is None
    b_page = mem_client.get("/v1/sessions", params={"user_id": "u1"}, headers=b.headers).json()
    assert [s["session_id"] for s in b_page["sessions"]] == ["b-only", "u1-s1"]

    one = mem_client.get("/v1/sessions/u2-s1", headers=a.headers)
    assert one.status_code == 200
    assert (one.json()["user_id"], one.json()["message_count"]) == ("u2", 1)
    other = mem_client.get("/v1/sessions/u2-s1", headers=b.headers)
    assert (other.status_code, other.json()["error"]["code"]) == (404, "session_not_found")


def test_memory_window_lastn_summary_and_lag(mem_client: TestClient, catalog: Settings,
                                             procs: dict[str, Proc],
                                             mem_tenants: dict[str, Tenant]) -> None:
    # The session's worker would fold the 8 messages past the window (to seq 14) whenever its
    # sweep comes round; then the external summary at seq 10 arrives late and is, rightly, kept
    # but not shown. Paused, the reads see the unfolded session and the external summary only.
    with worker_paused(procs):
        _window_lastn_summary_and_lag(mem_client, catalog, mem_tenants)


def _window_lastn_summary_and_lag(mem_client: TestClient, catalog: Settings,
                                  mem_tenants: dict[str, Tenant]) -> None:
    a, b = mem_tenants["a"], mem_tenants["b"]
    events, msgs = _conversation(a.namespace, "long", 20)
    events += _conversation(b.namespace, "long", 3)[0]
    ingest(catalog, events)
    window = catalog.memory_window  # 12

    body = mem_client.get("/v1/sessions/long/memory", headers=a.headers).json()
    assert body["summary"] is None
    assert _contents(body) == [f"long turn {i}" for i in range(20 - window + 1, 21)]
    assert body["summary_lag"] == 20 - window
    last3 = mem_client.get("/v1/sessions/long/memory", params={"lastn": 3},
                           headers=a.headers).json()
    assert _contents(last3) == ["long turn 18", "long turn 19", "long turn 20"]
    assert [m["seq"] for m in last3["messages"]] == [18, 19, 20]

    summary = str(uuid.uuid4())
    ingest(catalog, [envelope("summary.put", a.namespace, {
        "session_id": "long", "uuid": summary, "content": "Turns one to ten happened.",
        "recent_message_uuid": msgs[9]["uuid"]})])
    body = mem_client.get("/v1/sessions/long/memory", headers=a.headers).json()
    assert body["summary"]["uuid"] == summary
    assert body["summary"]["recent_message_uuid"] == msgs[9]["uuid"]
    assert _contents(body) == [f"long turn {i}" for i in range(11, 21)]
    assert body["summary_lag"] == 0
    b_body = mem_client.get("/v1/sessions/long/memory", headers=b.headers).json()
    assert (b_body["summary"], len(b_body["messages"])) == (None, 3)


def test_messages_by_page(mem_client: TestClient, catalog: Settings,
                          mem_tenants: dict[str, Tenant]) -> None:
    a, b = mem_tenants["a"], mem_tenants["b"]
    ingest(catalog, _conversation(a.namespace, "paged", 7)[0])
    seen: list[str] = []
    after = 0
    while True:
        page = mem_client.get("/v1/sessions/paged/messages",
                              params={"after_seq": after, "limit": 3}, headers=a.headers).json()
        seen += _contents(page)
        if page["next_after_seq"] is None:
            break
        after = page["next_after_seq"]
    assert seen == [f"paged turn {i}" for i in range(1, 8)]
    missing = mem_client.get("/v1/sessions/paged/messages", headers=b.headers)
    assert missing.status_code == 404


def test_deleted_sessions_are_absent_and_bad_requests_name_the_field(
        mem_client: TestClient, catalog: Settings, mem_tenants: dict[str, Tenant]) -> None:
    a, b = mem_tenants["a"], mem_tenants["b"]
    events = _conversation(a.namespace, "gone", 2)[0] + _conversation(b.namespace, "gone", 2)[0]
    ingest(catalog, [*events, envelope("session.delete", a.namespace, {"session_id": "gone"})])
    for path in ("/v1/sessions/gone", "/v1/sessions/gone/memory", "/v1/sessions/gone/messages"):
        answer = mem_client.get(path, headers=a.headers)
        assert (answer.status_code, answer.json()["error"]["code"]) == (404, "session_not_found")
        assert mem_client.get(path, headers=b.headers).status_code == 200
    posted = mem_client.post("/v1/sessions/gone/messages",
                             json={"messages": [message("hello?")]}, headers=a.headers)
    assert posted.status_code == 404
    listed = mem_client.get("/v1/sessions", headers=a.headers).json()
    assert "gone" not in [s["session_id"] for s in listed["sessions"]]

    for path, params, field in (("/v1/sessions/gone/memory", {"lastn": 0}, "lastn"),
                                ("/v1/sessions/gone/messages", {"after_seq": -1}, "after_seq"),
                                ("/v1/sessions", {"limit": 0}, "limit")):
        bad = mem_client.get(path, params=params, headers=b.headers)
        assert bad.status_code == 422
        assert bad.json()["error"]["field"] == field
    for body, field in (({"messages": []}, "messages"),
                        ({"messages": [{**message("x"), "uuid": "nope"}]}, "messages.0.uuid"),
                        ({"messages": [message("x")], "extra": 1}, "extra")):
        bad = mem_client.post("/v1/sessions/gone/messages", json=body, headers=b.headers)
        assert (bad.status_code, bad.json()["error"]["field"]) == (422, field)


def test_write_through_reads_its_own_writes(procs: dict[str, Proc], mem_client: TestClient,
                                            mem_tenants: dict[str, Tenant]) -> None:
    a, b = mem_tenants["a"], mem_tenants["b"]
    first = [message("I am posting through the API"), message("noted", role="assistant")]
    answer = mem_client.post("/v1/sessions/live/messages",
                             json={"messages": first, "wait": True}, headers=a.headers)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "applied"
    assert [(m["uuid"], m["seq"]) for m in body["messages"]] == [
        (first[0]["uuid"], 1), (first[1]["uuid"], 2)]
    memory = mem_client.get("/v1/sessions/live/memory", headers=a.headers).json()
    assert _contents(memory) == ["I am posting through the API", "noted"]

    # published without waiting: accepted now, stored later (the same event path)
    later = message("fire and forget")
    accepted = mem_client.post("/v1/sessions/live/messages", json={"messages": [later]},
                               headers=a.headers)
    assert (accepted.status_code, accepted.json()["status"]) == (202, "accepted")
    again = mem_client.post("/v1/sessions/live/messages",
                            json={"messages": [later], "wait": True}, headers=a.headers)
    assert again.json()["messages"][0]["seq"] == 3  # idempotent by uuid: stored once

    refused = mem_client.post("/v1/sessions/live/messages", headers=a.headers, json={
        "messages": [message("sneaky", metadata={"system": {"entities": []}})]})
    assert (refused.status_code, refused.json()["error"]["code"]) == (
        403, "privileged_key_required")
    assert mem_client.get("/v1/sessions/live", headers=b.headers).status_code == 404


def test_write_through_without_a_broker_is_a_503(catalog: Settings,
                                                 mem_tenants: dict[str, Tenant]) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    a = mem_tenants["a"]
    with api_client(catalog, [a], "write", kafka_bootstrap=f"127.0.0.1:{closed}",
                    memory_write_wait=2.0) as client:
        answer = client.post("/v1/sessions/nowhere/messages",
                             json={"messages": [message("lost?")]}, headers=a.headers)
        assert (answer.status_code, answer.json()["error"]["code"]) == (503, "unavailable")
        # the reads do not need the broker
        assert client.get("/v1/sessions/nowhere", headers=a.headers).status_code == 404
