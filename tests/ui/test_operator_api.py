"""The explorer's server side on the running API: the operator's status only for operator keys
(every tenant's data is in it), `GET /v1/me` naming only the caller's own namespaces with their
scopes, and the static files and graph library at /ui."""

from __future__ import annotations

import httpx

from pipeline.access import shorthand_name
from tests.ui.conftest import Explorer


def test_operator_status_takes_an_operator_key(explorer: Explorer) -> None:
    a, b = explorer.tenants["a"], explorer.tenants["b"]
    anonymous = httpx.get(explorer.url + "/v1/admin/status", timeout=30)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["field"] == "Authorization"
    for key in (a.key, b.key, explorer.both_key):  # a tenant's key sees no other tenant's data
        refused = explorer.get(key, "/v1/admin/status")
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"] == {
            "code": "operator_required", "field": "Authorization",
            "message": "the operator's status takes an operator key"}

    status = explorer.get(explorer.admin_key, "/v1/admin/status")
    assert status.status_code == 200, status.text
    body = status.json()
    assert {s["name"] for s in body["services"]} >= {"postgres", "broker", "falkordb", "redis"}
    assert body["lag"]["group"] == body["index"]["consumer_group"]
    assert "backlog" in body["outbox"] and "pending" in body["embedding"]
    assert [g["state"] for g in body["generations"] if g["id"] == 1] == ["active"]
    letters = {d["event_id"]: d for d in body["dead_letter_list"]["letters"]}
    for tenant in (a, b):  # both tenants' poison events, with their reason and namespace
        letter = letters[tenant.poison_event]
        assert letter["code"] == "unknown_kind" and letter["namespace"] == str(tenant.namespace)
        assert "no_such_kind" in letter["message"]
    assert body["dead_letter_list"]["by_code"]["unknown_kind"] >= 2
    assert body["dead_letters"]["count"] >= len(letters)


def test_me_names_only_the_callers_namespaces(explorer: Explorer) -> None:
    a, b = explorer.tenants["a"], explorer.tenants["b"]
    assert explorer.get(a.key, "/v1/me").json() == {
        "name": shorthand_name(a.key), "namespaces": [str(a.namespace)],
        "scopes": {str(a.namespace): ["read"]}, "operator": False}
    assert explorer.get(explorer.both_key, "/v1/me").json() == {
        "name": shorthand_name(explorer.both_key),
        "namespaces": [str(a.namespace), str(b.namespace)],
        "scopes": {str(a.namespace): ["read"], str(b.namespace): ["read"]}, "operator": False}
    assert explorer.get(explorer.admin_key, "/v1/me").json() == {
        "name": "ui-operator", "namespaces": [], "scopes": {}, "operator": True}
    unknown = explorer.get("no-such-key", "/v1/me")
    assert unknown.status_code == 401 and unknown.json()["error"]["code"] == "unauthorized"


def test_the_explorer_and_its_graph_library_are_served(explorer: Explorer) -> None:
    page = httpx.get(explorer.url + "/ui", follow_redirects=True, timeout=30)
    assert page.status_code == 200 and "brainstream explorer" in page.text
    library = httpx.get(explorer.url + "/ui/vendor/cytoscape.min.js", timeout=30)
    assert library.status_code == 200 and "cytoscape" in library.text[:2000]
    assert library.headers["content-type"].startswith("text/javascript")
    script = httpx.get(explorer.url + "/ui/js/app.js", timeout=30)
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
