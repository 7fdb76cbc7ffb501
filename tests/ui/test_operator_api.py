"""The explorer's server side on the running API: the operator's status only for admin keys
(every tenant's data is in it), `GET /v1/me` naming only the caller's own namespaces, and the
static files and graph library at /ui."""

from __future__ import annotations

import subprocess
import sys

import httpx

from pipeline.domain.setting_values import MASK
from tests.ui.conftest import DSN_PASSWORD, Explorer


def test_operator_status_takes_an_admin_key(explorer: Explorer) -> None:
    a, b = explorer.tenants["a"], explorer.tenants["b"]
    anonymous = httpx.get(explorer.url + "/v1/admin/status", timeout=30)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["field"] == "Authorization"
    for key in (a.key, b.key, explorer.both_key):  # a tenant's key sees no other tenant's data
        refused = explorer.get(key, "/v1/admin/status")
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"] == {
            "code": "admin_required", "field": "Authorization",
            "message": "the operator's status takes an admin key"}

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


def test_no_password_of_a_dsn_is_answered_or_printed(explorer: Explorer) -> None:
    """Issue 35 item 9: the API's Postgres DSN carries a password (as compose's does); the
    operator's status answers the address with it masked, and so do `brainstream status` and
    `services status`, in text and JSON, for the same settings."""
    status = explorer.get(explorer.admin_key, "/v1/admin/status")
    assert status.status_code == 200, status.text
    assert DSN_PASSWORD not in status.text
    postgres = next(s for s in status.json()["services"] if s["name"] == "postgres")
    assert postgres["state"] == "healthy" and f":{MASK}@" in postgres["address"]
    for argv in (["status"], ["status", "--json"], ["services", "status"],
                 ["services", "status", "--json"]):
        done = subprocess.run([sys.executable, "-m", "pipeline.cli", *argv], env=explorer.env,
                              capture_output=True, text=True, timeout=180, check=False)
        printed = done.stdout + done.stderr
        assert "postgres" in done.stdout, printed
        assert DSN_PASSWORD not in printed and MASK in done.stdout, (argv, printed)


def test_me_names_only_the_callers_namespaces(explorer: Explorer) -> None:
    a, b = explorer.tenants["a"], explorer.tenants["b"]
    assert explorer.get(a.key, "/v1/me").json() == {"namespaces": [str(a.namespace)],
                                                   "admin": False}
    assert explorer.get(explorer.both_key, "/v1/me").json() == {
        "namespaces": [str(a.namespace), str(b.namespace)], "admin": False}
    assert explorer.get(explorer.admin_key, "/v1/me").json() == {"namespaces": [],
                                                                 "admin": True}
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
