"""Issue 15 item 2: the web explorer in a real browser (headless chromium) against the running
API: search, an object, its graph expanded by click, a path, a session's memory and the operator
page, each showing what the API answers for the same request; and key A never shows B's data.
The walk-through writes the README's screenshots (docs/screenshots/)."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.support.ui import Select

from pipeline.domain.setting_values import MASK
from tests.ui.browse import (
    css,
    enter_key,
    error_code,
    go,
    graph_nodes,
    ids,
    one,
    screenshot,
    wait,
)
from tests.ui.conftest import DSN_PASSWORD, SESSION, Explorer

QUERY = "Acme robot arms for warehouses"


def _object_page(browser: Any, title: str) -> None:
    """Wait until the object page of `title` is the one shown."""
    wait(browser, lambda d: css(d, "#properties")
         and one(d, "#object-title").text.startswith(title), f"the object page of {title}")


def test_walk_through_search_object_graph_path_memory_operator(explorer: Explorer,
                                                               browser: Any) -> None:
    a = explorer.tenants["a"]
    enter_key(browser, explorer.url, a.key)
    go(browser, "#/search")
    one(browser, "#q").send_keys(QUERY)
    Select(one(browser, "#mode")).select_by_value("hybrid")
    one(browser, "#search-button").click()
    hits = wait(browser, lambda d: css(d, "[data-test=hit]"), "search hits")
    answer = explorer.post(a.key, "/v1/search", {"query": QUERY, "mode": "hybrid",
                                                 "limit": 10}).json()
    assert ids(hits) == [o["id"] for o in answer["objects"]]
    assert a.ids["company"] in ids(hits)
    marked = {m.text.lower() for m in css(browser, "#results mark")}
    assert {"acme", "warehouses"} <= marked, marked  # the query's words, highlighted
    screenshot(browser, "search")

    # the company's hit opens its page: what GET /v1/objects and /v1/expand answer
    one(browser, f"[data-test=hit][data-id='{a.ids['company']}'] a.title").click()
    title = one(browser, "#object-title").text
    company = explorer.get(a.key, f"/v1/objects/{a.ids['company']}").json()
    assert title.startswith(company["title"])
    properties = one(browser, "#properties").text
    assert all(f"{k} {v}".replace("True", "true").replace("False", "false") in properties
               for k, v in (("industry", '"robotics"'), ("public", "false")))
    assert ids(css(browser, "#links [data-test=object-link]")) == [a.ids["deal"]]
    screenshot(browser, "object")
    # the site visit's parts and entities, as the API answers them
    go(browser, f"#/object/{a.ids['visit']}")
    _object_page(browser, "Rotterdam site visit")
    visit = explorer.get(a.key, f"/v1/objects/{a.ids['visit']}").json()
    parts = explorer.get(a.key, f"/v1/objects/{a.ids['visit']}/children").json()["objects"]
    assert [r.text for r in css(browser, "#entities tbody tr")] == [
        f"{e['name']} {e['label']} {e['mention_count']}" for e in visit["entities"]]
    assert len(css(browser, "#parts tbody tr")) == len(parts)
    go(browser, f"#/object/{a.ids['company']}")
    _object_page(browser, company["title"])

    # its graph: the company and what /v1/expand answers around it; a click expands the deal
    one(browser, "#open-graph").click()
    around = explorer.post(a.key, "/v1/expand", {"object_id": a.ids["company"]}).json()
    expected = {a.ids["company"], *(o["id"] for o in around["objects"])}
    assert wait(browser, lambda d: graph_nodes(d) == expected and graph_nodes(d),
                "the company's neighbourhood drawn") == expected
    assert a.ids["visit"] not in expected  # two hops away: shown only once the deal expands
    one(browser, f"[data-expand='{a.ids['deal']}']").click()
    wait(browser, lambda d: a.ids["visit"] in graph_nodes(d), "the deal expanded")
    screenshot(browser, "graph")

    # a path from the site visit to the company, as /v1/paths answers it
    go(browser, f"#/paths?from={a.ids['visit']}&to={a.ids['company']}")
    shown = wait(browser, lambda d: css(d, "[data-test=path]"), "paths")
    paths = explorer.post(a.key, "/v1/paths", {"from": [a.ids["visit"]],
                                               "to": [a.ids["company"]], "k": 5}).json()
    assert len(shown) == len(paths["paths"]) >= 1
    first = [n["id"] for n in paths["paths"][0]["nodes"] if n["type"] == "object"]
    assert ids(css(shown[0], "[data-test=object-link]")) == first
    assert first[0] == a.ids["visit"] and first[-1] == a.ids["company"]
    screenshot(browser, "paths")

    # the session's memory, from the namespace's session list
    go(browser, "#/memory")
    one(browser, f"[data-session='{SESSION}']").click()
    shown = wait(browser, lambda d: css(d, "[data-test=message]"), "messages")
    memory = explorer.get(a.key, f"/v1/sessions/{SESSION}/memory").json()
    assert [m.text.splitlines()[-1] for m in shown] == [m["content"] for m in memory["messages"]]
    screenshot(browser, "memory")

    # the operator page: refused to a tenant's key, shown to an operator key
    go(browser, "#/operator")
    assert error_code(browser) == "operator_required"
    enter_key(browser, explorer.url, explorer.admin_key)
    rows = wait(browser, lambda d: css(d, "#dead-letters tbody tr"), "dead letters")
    status = explorer.get(explorer.admin_key, "/v1/admin/status").json()
    services = one(browser, "#services").text
    assert all(f"{s['name']} {s['mode']} {s['state']}" in services for s in status["services"])
    poison = [r.text for r in rows if a.poison_event in r.text]
    assert len(poison) == 1 and "unknown_kind" in poison[0], poison
    # the API's DSN carries a password (tests/ui/conftest.py): shown masked, never in clear
    assert "postgres external healthy" in services
    assert DSN_PASSWORD not in browser.page_source and MASK in services
    screenshot(browser, "operator")


def test_key_a_never_shows_b_and_the_chooser_picks_a_namespace(explorer: Explorer,
                                                               browser: Any) -> None:
    a, b = explorer.tenants["a"], explorer.tenants["b"]
    enter_key(browser, explorer.url, a.key)
    assert not one(browser, "#namespace").is_displayed()  # one namespace: no chooser
    go(browser, "#/search")
    one(browser, "#q").send_keys("Bravo Secret Robotics")
    one(browser, "#search-button").click()
    one(browser, "#answer-info")
    assert set(ids(css(browser, "[data-test=hit]"))) <= set(a.ids.values())
    assert "Bravo Secret" not in one(browser, "#results").text
    refused = explorer.get(a.key, f"/v1/objects/{b.ids['only_b']}")
    assert refused.status_code == 404
    for page in (f"#/object/{b.ids['only_b']}", f"#/graph/{b.ids['company']}"):
        go(browser, page)
        assert error_code(browser) == refused.json()["error"]["code"], page
        assert not css(browser, "[data-test=object-link]")

    # a key of both namespaces: the chooser lists them, and each shows its own objects
    enter_key(browser, explorer.url, explorer.both_key)
    chooser = Select(one(browser, "#namespace"))
    assert {o.get_attribute("value") for o in chooser.options} == {str(a.namespace),
                                                                   str(b.namespace)}
    for tenant, sees_secret in ((b, True), (a, False)):
        chooser.select_by_value(str(tenant.namespace))
        go(browser, f"#/object/{b.ids['only_b']}")
        if sees_secret:
            assert one(browser, "#object-title").text.startswith("Bravo Secret Robotics")
        else:
            assert error_code(browser) == refused.json()["error"]["code"]
        go(browser, "#/search")


def test_search_filters_and_modes_are_the_schemas(explorer: Explorer, browser: Any) -> None:
    a = explorer.tenants["a"]
    schema = explorer.get(a.key, "/v1/schema").json()
    enter_key(browser, explorer.url, a.key)
    go(browser, "#/search")
    kind = Select(one(browser, "#kind"))
    assert [o.get_attribute("value") for o in kind.options] == [
        "", *(k["kind"] for k in schema["kinds"])]
    kind.select_by_value("deal")
    deal = next(k for k in schema["kinds"] if k["kind"] == "deal")
    inputs = {i.get_attribute("data-property"): i for i in css(browser, "[data-property]")}
    assert set(inputs) == {f["name"] for f in deal["fields"] if f["filterable"]}
    inputs["stage"].send_keys("prospect")
    for mode in ("ppr", "auto"):
        Select(one(browser, "#mode")).select_by_value(mode)
        browser.execute_script("document.getElementById('results').replaceChildren()")
        one(browser, "#q").clear()
        one(browser, "#q").send_keys("Acme rollout")
        one(browser, "#search-button").click()
        info = one(browser, "#answer-info").text
        answer = explorer.post(a.key, "/v1/search", {
            "query": "Acme rollout", "mode": mode, "limit": 10,
            "filters": {"kind": "deal", "stage": "prospect"}}).json()
        assert ids(css(browser, "[data-test=hit]")) == [o["id"] for o in answer["objects"]]
        assert [o["id"] for o in answer["objects"]] == [a.ids["deal"]]
        assert f"mode {answer['mode']}" in info


def _refused_by_policy(browser: Any) -> list[str]:
    """The console's Content-Security-Policy refusals since the last call."""
    return [entry["message"] for entry in browser.get_log("browser")
            if "Content Security Policy" in entry["message"]]


def test_the_pages_run_under_their_policy_and_keep_the_key_per_tab(explorer: Explorer,
                                                                   browser: Any) -> None:
    """Issue 35 item 10: the explorer (its graph drawn by cytoscape) and the OpenAPI page (Swagger
    UI from this origin) work under their strict Content-Security-Policy with nothing refused,
    and the key lives in the tab's sessionStorage, never in localStorage."""
    a = explorer.tenants["a"]
    browser.get(explorer.url + "/ui")
    browser.execute_script("localStorage.setItem('brainstream.key', 'left-by-an-old-explorer')")
    browser.refresh()  # the explorer forgets a key an earlier version kept for good
    _refused_by_policy(browser)
    enter_key(browser, explorer.url, a.key)
    stored = browser.execute_script(
        "return [localStorage.getItem('brainstream.key'), "
        "sessionStorage.getItem('brainstream.key')]")
    assert stored == [None, a.key]
    go(browser, f"#/graph/{a.ids['deal']}")
    wait(browser, lambda d: a.ids["deal"] in graph_nodes(d), "the deal's graph drawn")
    assert _refused_by_policy(browser) == []

    browser.get(explorer.url + "/docs")
    title = wait(browser, lambda d: css(d, ".swagger-ui .info .title"), "Swagger UI drawn")
    assert "brainstream read API" in title[0].text
    wait(browser, lambda d: css(d, ".opblock-summary-path"), "the operations listed")
    assert _refused_by_policy(browser) == []
    assert browser.execute_script("return typeof SwaggerUIBundle") == "function"
    loaded = browser.execute_script(
        "return performance.getEntriesByType('resource').map(r => r.name)")
    assert loaded and all(url.startswith(explorer.url) for url in loaded), loaded


def _facets_shown(browser: Any, name: str) -> list[tuple[str, str]]:
    return [(str(b.get_attribute("data-value")), b.text)
            for b in css(browser, f"[data-test=facet-bucket][data-facet='{name}']")]


def _run_search(browser: Any) -> None:
    """Search again and wait for the answer that replaces the shown one."""
    browser.execute_script("document.getElementById('results').replaceChildren()")
    one(browser, "#search-button").click()
    one(browser, "#answer-info")


def test_search_facets_ranges_and_order_are_the_apis(explorer: Explorer, browser: Any) -> None:
    """The explorer's facets, range filters and order show what /v1/search answers for the same
    request; a facet's value narrows the search when clicked; tenant B's objects never count."""
    a = explorer.tenants["a"]
    enter_key(browser, explorer.url, a.key)
    go(browser, "#/search")
    one(browser, "#q").clear()
    one(browser, "#q").send_keys("Acme")
    Select(one(browser, "#sort")).select_by_value("updated_at:desc")
    _run_search(browser)
    body: dict[str, Any] = {"query": "Acme", "mode": "hybrid", "limit": 10,
                            "facets": [{"field": "kind"}],
                            "sort": {"field": "updated_at", "order": "desc"}}
    answer = explorer.post(a.key, "/v1/search", body).json()
    assert ids(css(browser, "[data-test=hit]")) == [o["id"] for o in answer["objects"]]
    kinds = answer["facets"]["kind"]["buckets"]
    assert _facets_shown(browser, "kind") == [(b["value"], f"{b['value']} ({b['count']})")
                                              for b in kinds]
    assert {b["value"]: b["count"] for b in kinds}["company"] == 1  # B's Acme is not counted
    screenshot(browser, "search-facets")

    # a kind's bucket narrows the search to that kind, and its value fields facet in turn
    one(browser, "[data-test=facet-bucket][data-facet=kind][data-value=deal]").click()
    wait(browser, lambda d: Select(one(d, "#kind")).first_selected_option
         .get_attribute("value") == "deal", "the kind chosen by its facet")
    deal_body = {**body, "filters": {"kind": "deal"},
                 "facets": [{"field": "kind"}, {"field": "$.stage"}]}
    answer = explorer.post(a.key, "/v1/search", deal_body).json()
    wait(browser, lambda d: ids(css(d, "[data-test=hit]")) == [o["id"] for o in
                                                              answer["objects"]] or None,
         "the deals only")
    assert [o["id"] for o in answer["objects"]] == [a.ids["deal"]]
    assert _facets_shown(browser, "$.stage") == [
        (b["value"], f"{b['value']} ({b['count']})")
        for b in answer["facets"]["$.stage"]["buckets"]]

    # ranges on a number and a datetime: the page asks the API's `where`, and answers as it does
    bounds = {(i.get_attribute("data-range"), i.get_attribute("data-field")): i
              for i in css(browser, "input[data-range]")}
    assert set(bounds) == {(op, f) for op in ("gte", "lte") for f in ("amount", "close_date")}
    for (op, field), value in {("gte", "amount"): "400000", ("lte", "amount"): "500000",
                               ("gte", "close_date"): "2027-02-01",
                               ("lte", "close_date"): "2027-02-28"}.items():
        browser.execute_script("arguments[0].value = arguments[1]", bounds[(op, field)], value)
    _run_search(browser)
    where = {"and": [{"jsonpath": "$.amount", "gte": 400000},
                     {"jsonpath": "$.amount", "lte": 500000},
                     {"jsonpath": "$.close_date", "gte": "2027-02-01T00:00:00Z"},
                     {"jsonpath": "$.close_date", "lte": "2027-02-28T23:59:59.999999Z"}]}
    answer = explorer.post(a.key, "/v1/search", {**deal_body, "where": where}).json()
    assert [o["id"] for o in answer["objects"]] == [a.ids["deal"]]
    assert ids(css(browser, "[data-test=hit]")) == [a.ids["deal"]]
    browser.execute_script("arguments[0].value = '500001'", bounds[("gte", "amount")])
    _run_search(browser)
    wait(browser, lambda d: "No hits." in one(d, "#results").text, "nothing above the range")
    assert explorer.post(a.key, "/v1/search", {**deal_body, "where": {"and": [
        {"jsonpath": "$.amount", "gte": 500001}, *where["and"][1:]]}}).json()["objects"] == []


def test_more_like_this_is_the_apis_similar_to(explorer: Explorer, browser: Any) -> None:
    """A hit's "more like this" shows what /v1/search answers for `similar_to` that object:
    the object itself left out, and only the caller's objects."""
    a = explorer.tenants["a"]
    enter_key(browser, explorer.url, a.key)
    go(browser, "#/search")
    one(browser, "#q").clear()
    one(browser, "#q").send_keys("Acme")
    _run_search(browser)
    one(browser, f"[data-test=hit][data-id='{a.ids['deal']}'] [data-test=similar]").click()
    answer = explorer.post(a.key, "/v1/search", {"similar_to": a.ids["deal"], "limit": 10,
                                                 "facets": [{"field": "kind"}]}).json()
    expected = [o["id"] for o in answer["objects"]]
    assert expected and a.ids["deal"] not in expected
    assert set(expected) <= set(a.ids.values())  # tenant B's look-alikes never answer
    wait(browser, lambda d: ids(css(d, "[data-test=hit]")) == expected or None,
         "the deal's look-alikes")
