"""The explorer's server side on the running API: the operator's status only for operator keys
(every tenant's data is in it), `GET /v1/me` naming only the caller's own namespaces with their
scopes, and the static files and graph library at /ui."""

from __future__ import annotations

import subprocess
import sys

import httpx

from pipeline.access import shorthand_name
from pipeline.domain.setting_values import MASK
from tests.ui.conftest import DSN_PASSWORD, Explorer


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


def _policy(response: httpx.Response) -> dict[str, str]:
    """The Content-Security-Policy of an answer, by directive."""
    directives = (d.strip().split(" ", 1) for d in
                  response.headers["content-security-policy"].split(";"))
    return {d[0]: d[1] if len(d) > 1 else "" for d in directives}


def test_every_answer_says_nosniff_no_framing_and_its_policy(explorer: Explorer) -> None:
    """Issue 35 item 10: the explorer's pages run only this origin's files (no inline script,
    no plugin, no <base>, never framed); the OpenAPI page too, its one inline script allowed by
    hash and Swagger UI served from here (no CDN); JSON answers allow nothing."""
    a = explorer.tenants["a"]
    answers = {
        "page": httpx.get(explorer.url + "/ui/", timeout=30),
        "script": httpx.get(explorer.url + "/ui/js/api.js", timeout=30),
        "library": httpx.get(explorer.url + "/ui/vendor/cytoscape.min.js", timeout=30),
        "docs": httpx.get(explorer.url + "/docs", timeout=30),
        "json": explorer.get(a.key, "/v1/me"),
        "refused": httpx.get(explorer.url + "/v1/me", timeout=30),
        "missing": httpx.get(explorer.url + "/no/such/page", timeout=30),
        "ops": httpx.get(explorer.url + "/healthz", timeout=30),
    }
    for name, answer in answers.items():
        assert answer.headers["x-content-type-options"] == "nosniff", name
        assert answer.headers["x-frame-options"] == "DENY", name
        policy = _policy(answer)
        assert policy["frame-ancestors"] == "'none'" and policy["object-src"] == "'none'", name
        assert policy["base-uri"] == "'none'", name
    ui = _policy(answers["page"])
    assert ui["default-src"] == ui["script-src"] == ui["style-src"] == "'self'"
    assert "unsafe" not in answers["page"].headers["content-security-policy"]
    assert _policy(answers["json"])["default-src"] == "'none'"
    docs = answers["docs"]
    assert docs.status_code == 200 and "/ui/vendor/swagger-ui-bundle.js" in docs.text
    assert "cdn" not in docs.text.lower()
    assert "unsafe" not in docs.headers["content-security-policy"]
    assert _policy(docs)["script-src"].startswith("'self' 'sha256-")
    for name in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"):
        assert httpx.get(explorer.url + "/ui/vendor/" + name, timeout=30).status_code == 200, name
    assert httpx.get(explorer.url + "/ui/vendor/package.json", timeout=30).status_code == 404
    assert httpx.get(explorer.url + "/redoc", timeout=30).status_code == 404


def test_the_explorer_and_its_graph_library_are_served(explorer: Explorer) -> None:
    page = httpx.get(explorer.url + "/ui", follow_redirects=True, timeout=30)
    assert page.status_code == 200 and "brainstream explorer" in page.text
    library = httpx.get(explorer.url + "/ui/vendor/cytoscape.min.js", timeout=30)
    assert library.status_code == 200 and "cytoscape" in library.text[:2000]
    assert library.headers["content-type"].startswith("text/javascript")
    script = httpx.get(explorer.url + "/ui/js/app.js", timeout=30)
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
