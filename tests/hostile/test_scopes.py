"""Keys with scopes (issue 35, items 1, 2 and part of 12) against a real `brainstream api` (two
worker processes) over the running pipeline, two tenants: a read key is refused every write, a
write key publishes under its own source but neither sets `version` nor claims another
publisher's source, an admin key sets `version` and curates under its name, a key that writes A
and reads B cannot write B, and a publish retried with its Idempotency-Key is applied once."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg
import pytest

from pipeline.settings import Settings
from tests.apiprocess import serve_api
from tests.pipelineutil import Proc, wait_for
from tests.stackutil import settings_env

pytestmark = pytest.mark.stack

NOTE = ("Kickoff with Acme Robotics in Rotterdam. Budget owner is Dana Whitfield; procurement "
        "needs a security review. Next step: send Dana Whitfield the SOC 2 report.")


@dataclass
class Scoped:
    """The API process, the two tenants' namespaces and a key per role."""

    url: str
    a: uuid.UUID
    b: uuid.UUID
    keys: dict[str, str]  # role -> secret

    def call(self, method: str, path: str, role: str, *, body: Any = None,
             headers: dict[str, str] | None = None) -> httpx.Response:
        """A request with `role`'s key, in its first namespace unless `headers` name one."""
        first = self.b if role == "b_writer" else self.a
        return httpx.request(method, self.url + path, json=body, timeout=60, headers={
            "Authorization": f"Bearer {self.keys[role]}", "X-Namespace": str(first),
            **(headers or {})})


@pytest.fixture(scope="module")
def api(catalog: Settings, procs: dict[str, Proc]) -> Iterator[Scoped]:
    a, b = uuid.uuid4(), uuid.uuid4()
    roles = {"reader": {"scopes": {str(a): ["read"]}},
             "writer": {"scopes": {str(a): ["write"], str(b): ["read"]}},
             "admin": {"scopes": {str(a): ["admin"]}},
             "b_writer": {"scopes": {str(b): ["write"]}}}
    keys = {role: f"scopes-{role}-{uuid.uuid4().hex[:8]}" for role in roles}
    api_keys = {keys[role]: {"name": f"scopes-{role.replace('_', '-')}", **record}
                for role, record in roles.items()}
    env = {**settings_env(catalog), "HF_HUB_OFFLINE": "1",
           "BRAINSTREAM_API_KEYS": json.dumps(api_keys), "BRAINSTREAM_API_WORKERS": "2",
           "BRAINSTREAM_MEMORY_WRITE_WAIT": "30"}
    log_path = catalog.resolved_data_dir / "hostile-logs" / "scopes-api.log"
    with serve_api(env, log_path) as running:
        yield Scoped(running.url, a, b, keys)


def _put(object_id: str, title: str, *, event_id: str | None = None, kind: str = "company",
         **extra: Any) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "brainstream.object.put",
                             "data": {"id": object_id, "kind": kind, "title": title, **extra}}
    if event_id is not None:
        event["id"] = event_id
    return event


def _error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


def _ledger(settings: Settings, namespace: uuid.UUID, event_id: str) -> list[str]:
    """The sources the processed-event ledger holds `event_id` under, in `namespace`."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        rows = conn.execute("SELECT source FROM processed_events WHERE namespace_id = %s"
                            " AND event_id = %s", (namespace, event_id)).fetchall()
    return [str(r[0]) for r in rows]


def test_a_read_key_is_refused_every_write(api: Scoped) -> None:
    one, two = str(uuid.uuid4()), str(uuid.uuid4())
    writes = [
        ("POST", "/v1/events", {"events": [_put(one, "Never", event_id=two)]}),
        ("POST", "/v1/sessions/scoped/messages", {"messages": [
            {"uuid": str(uuid.uuid4()), "role": "user", "content": "never stored"}]}),
        ("PUT", "/v1/expand/recipes/never", {"max_hops": 1}),
        ("DELETE", "/v1/expand/recipes/never", None),
        ("POST", "/v1/entities/merge", {"from": one, "into": two}),
        ("POST", f"/v1/entities/possibly_same/{one}/{two}", {"decision": "refuse"}),
    ]
    for method, path, body in writes:
        error = _error(api.call(method, path, "reader", body=body), 403)
        assert (error["code"], error["field"]) == ("scope_required", "Authorization"), path
    # a write key does not curate either: merges and pair decisions take admin
    for method, path, body in writes[4:]:
        error = _error(api.call(method, path, "writer", body=body), 403)
        assert error["code"] == "scope_required", path
    # nothing was written: no recipe, no session; reads still answer the read key
    assert api.call("GET", "/v1/expand/recipes/never", "reader").status_code == 404
    assert api.call("GET", "/v1/sessions/scoped", "reader").status_code == 404
    assert api.call("POST", "/v1/search", "reader", body={"query": "anything"}).status_code \
        == 200


def test_me_shows_each_namespace_with_its_scopes(api: Scoped) -> None:
    me = api.call("GET", "/v1/me", "writer").json()
    assert me == {"name": "scopes-writer", "namespaces": [str(api.a), str(api.b)],
                  "scopes": {str(api.a): ["read", "write"], str(api.b): ["read"]},
                  "operator": False}
    assert api.call("GET", "/v1/me", "admin").json()["scopes"] == {
        str(api.a): ["read", "write", "admin"]}


def test_a_write_key_publishes_as_itself_only(catalog: Settings, api: Scoped) -> None:
    obj, event_id = str(uuid.uuid4()), "scoped-" + uuid.uuid4().hex
    crm = api.call("POST", "/v1/events", "writer", body={"events": [
        {**_put(obj, "Claimed"), "id": "crm-00042", "source": "crm"}]})
    error = _error(crm, 422)
    assert (error["code"], error["field"]) == ("source_not_allowed", "events.0.source")
    versioned = api.call("POST", "/v1/events", "writer", body={"events": [
        {**_put(obj, "Pinned", event_id=event_id), "version": 2**62}]})
    error = _error(versioned, 403)
    assert (error["code"], error["field"]) == ("scope_required", "events.0.version")
    done = api.call("POST", "/v1/events", "writer", body={
        "events": [_put(obj, "Written", event_id=event_id)], "wait": True})
    assert done.status_code == 200, done.text
    assert done.json()["events"][0]["status"] == "applied"
    assert _ledger(catalog, api.a, event_id) == ["api:scopes-writer"]
    assert _ledger(catalog, api.a, "crm-00042") == []
    # its memory writes carry its source too
    posted = api.call("POST", "/v1/sessions/scoped-writer/messages", "writer", body={
        "messages": [{"uuid": str(uuid.uuid4()), "role": "user", "content": "hello"}],
        "wait": True})
    assert posted.status_code == 200, posted.text
    assert _ledger(catalog, api.a, posted.json()["event_id"]) == ["api:scopes-writer"]


def test_an_admin_key_sets_version_within_the_columns_range(api: Scoped) -> None:
    obj = str(uuid.uuid4())
    too_big = api.call("POST", "/v1/events", "admin", body={"events": [
        {**_put(obj, "Too far", event_id=str(uuid.uuid4())), "version": 2**63}]})
    assert _error(too_big, 422)["field"] == "events.0.version"
    for version, title in ((7, "Version seven"), (5, "Older, ignored")):
        done = api.call("POST", "/v1/events", "admin", body={"events": [
            {**_put(obj, title, event_id=str(uuid.uuid4())), "version": version}],
            "wait": True})
        assert done.status_code == 200, done.text
    assert api.call("GET", f"/v1/objects/{obj}", "reader").json()["title"] == "Version seven"


def test_write_on_a_and_read_on_b_cannot_write_b(catalog: Settings, api: Scoped) -> None:
    obj, event_id = str(uuid.uuid4()), str(uuid.uuid4())
    on_b = {"X-Namespace": str(api.b)}
    refused = api.call("POST", "/v1/events", "writer", headers=on_b, body={
        "events": [_put(obj, "Into B", event_id=event_id)]})
    error = _error(refused, 403)
    assert (error["code"], error["field"]) == ("scope_required", "Authorization")
    refused = api.call("POST", "/v1/sessions/into-b/messages", "writer", headers=on_b, body={
        "messages": [{"uuid": str(uuid.uuid4()), "role": "user", "content": "into B"}]})
    assert _error(refused, 403)["code"] == "scope_required"
    # B's own writer publishes the same object id afterwards: had the refused event gone out,
    # the consumer would have applied it first (one object id, one partition)
    mine = api.call("POST", "/v1/events", "b_writer", body={
        "events": [_put(obj, "B's own", event_id=str(uuid.uuid4()))], "wait": True})
    assert mine.status_code == 200, mine.text
    assert _ledger(catalog, api.b, event_id) == []
    read = api.call("GET", f"/v1/objects/{obj}", "writer", headers=on_b)
    assert read.status_code == 200 and read.json()["title"] == "B's own"


def test_a_retried_publish_is_applied_once(catalog: Settings, api: Scoped) -> None:
    obj, other = str(uuid.uuid4()), str(uuid.uuid4())
    missing = api.call("POST", "/v1/events", "writer", body={"events": [_put(obj, "No id")]})
    error = _error(missing, 422)
    assert (error["code"], error["field"]) == ("idempotency_required", "events.0.id")

    retried = {"Idempotency-Key": "import-" + uuid.uuid4().hex}
    body = {"events": [_put(obj, "First write")], "wait": True}
    first = api.call("POST", "/v1/events", "writer", body=body, headers=retried)
    assert first.status_code == 200, first.text
    ids = [e["event_id"] for e in first.json()["events"]]
    later = api.call("POST", "/v1/events", "writer", body={"events": [
        _put(other, "Other", event_id=str(uuid.uuid4())),
        _put(obj, "A later write", event_id=str(uuid.uuid4()))], "wait": True})
    assert later.status_code == 200, later.text

    # the answer to the first request was lost: the caller sends it again, as it was
    again = api.call("POST", "/v1/events", "writer", body=body, headers=retried)
    assert again.status_code == 200, again.text
    assert [e["event_id"] for e in again.json()["events"]] == ids
    # a link from the object is keyed like its puts (one partition, in order): once it is
    # applied, the consumer has handled the retry before it
    link = api.call("POST", "/v1/events", "writer", body={"events": [{
        "type": "brainstream.link.put", "id": str(uuid.uuid4()),
        "data": {"from": obj, "to": other, "relation_type": "about"}}], "wait": True})
    assert link.status_code == 200, link.text
    assert api.call("GET", f"/v1/objects/{obj}", "writer").json()["title"] == "A later write"
    assert _ledger(catalog, api.a, ids[0]) == ["api:scopes-writer"]


def _resolved(api: Scoped, phrases: list[str]) -> list[str] | None:
    answer = api.call("POST", "/v1/resolve", "admin", body={"queries": phrases})
    found = [r.get("entity_id") for r in answer.json().get("results", [])]
    return [str(f) for f in found] if found and all(found) else None


def test_curation_is_recorded_under_the_keys_name(catalog: Settings, api: Scoped) -> None:
    note = api.call("POST", "/v1/events", "admin", body={"events": [
        _put(str(uuid.uuid4()), "Kickoff call", event_id=str(uuid.uuid4()), kind="note",
             content=NOTE, properties={"author": "jordan"})], "wait": True})
    assert note.status_code == 200, note.text
    dana, acme = wait_for(lambda: _resolved(api, ["Dana Whitfield", "Acme Robotics"]),
                          timeout=120, what="the note's entities to be extracted")
    merged = api.call("POST", "/v1/entities/merge", "admin", body={"from": dana, "into": acme})
    assert merged.status_code == 200, merged.text
    with psycopg.connect(catalog.effective_postgres_dsn) as conn:
        rows = conn.execute("SELECT source, decided_by FROM entity_decisions"
                            " WHERE namespace_id = %s", (api.a,)).fetchall()
    assert rows == [("api:scopes-admin", "scopes-admin")]
