"""The explorer's entity pages and curator's queue in a real browser, against the running
stack: an entity page reached from a mention on an object page (what GET /v1/entities/{id} and
its mentions answer), the entity search box (POST /v1/entities/search), an entity's
neighbourhood in the graph view, and the queue of held pairs with its buttons: a read key is
told it may not decide, a curator's defer moves the pair to the deferred list. Screenshots:
docs/screenshots/entity.png and review.png (`make screenshots`)."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from pipeline.entities.store.merges import ordered
from pipeline.settings import Settings
from tests.ui.browse import css, enter_key, error_code, go, graph_nodes, ids, one, screenshot, wait
from tests.ui.conftest import Explorer

pytestmark = pytest.mark.stack


def _hold_a_pair(settings: Settings, ns: uuid.UUID) -> tuple[str, str]:
    """A held POSSIBLY_SAME pair between two of the namespace's extracted entities (the
    Acme ones when there are two), as the proposal pass writes one."""
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT id FROM entities WHERE namespace_id = %s AND merged_into IS NULL AND"
            " part_count > 0 ORDER BY name NOT ILIKE 'acme%%', part_count DESC, name LIMIT 2",
            (ns,)).fetchall()
        low, high = ordered(rows[0][0], rows[1][0])
        conn.execute(
            "INSERT INTO entity_edges (namespace_id, from_id, to_id, edge_type, weight, status,"
            " confidence, method) VALUES (%s, %s, %s, 'POSSIBLY_SAME', 0.8, 'held', 0.8,"
            " 'prefix') ON CONFLICT (from_id, edge_type, predicate, to_id) DO UPDATE SET"
            " status = 'held'", (ns, low, high))
    return str(low), str(high)


def test_an_entity_page_from_a_mention_and_from_search(browser: WebDriver,
                                                       explorer: Explorer) -> None:
    a, b = explorer.tenants["a"], explorer.tenants["b"]
    enter_key(browser, explorer.url, a.key)
    go(browser, f"#/object/{a.ids['visit']}")
    visit = explorer.get(a.key, f"/v1/objects/{a.ids['visit']}").json()
    first = visit["entities"][0]
    one(browser, f"#entities [data-test=entity-link][data-id='{first['entity_id']}']").click()
    name = one(browser, "#entity-name").text
    page: dict[str, Any] = explorer.get(a.key, f"/v1/entities/{first['entity_id']}").json()
    assert name.startswith(page["name"])
    assert one(browser, "#entity-counts").text.startswith(
        f"{page['mention_count']} mentions in {page['object_count']} objects")
    assert [r.text for r in css(browser, "#entity-labels tbody tr")] == [
        f"{x['label']} {x['count']}" for x in page["labels"]]
    assert ids(css(browser, "#entity-neighbours [data-test=entity-link]")) == [
        n["entity_id"] for n in page["neighbours"]]
    mentions = explorer.get(a.key, f"/v1/entities/{page['id']}/mentions").json()["mentions"]
    rows = wait(browser, lambda d: css(d, "#entity-mentions tbody tr"), "the mentions")
    assert ids(css(browser, "#entity-mentions [data-test=object-link]")) == [
        m["object_id"] for m in mentions]
    assert [r.find_element("css selector", "mark").text for r in rows] == [
        m["text"] for m in mentions]
    screenshot(browser, "entity")

    # its neighbourhood, drawn from the same answer
    one(browser, "#entity-graph-link").click()
    expected = {page["id"], *(n["entity_id"] for n in page["neighbours"])}
    assert wait(browser, lambda d: graph_nodes(d) == expected and graph_nodes(d),
                "the entity's neighbourhood drawn") == expected

    # the search box: what POST /v1/entities/search answers, in order
    go(browser, "#/entities")
    one(browser, "#entity-query").send_keys(page["name"])
    one(browser, "#entity-search button").click()
    hits = wait(browser, lambda d: css(d, "#entity-hits [data-test=entity-link]"), "hits")
    answer = explorer.post(a.key, "/v1/entities/search", {"query": page["name"],
                                                          "limit": 20}).json()
    assert ids(hits) == [e["entity_id"] for e in answer["entities"]]
    assert ids(hits)[0] == page["id"]

    # another tenant's key: not found, in words
    enter_key(browser, explorer.url, b.key)
    go(browser, f"#/entity/{page['id']}")
    assert error_code(browser) == "not_found"


def test_the_curators_queue_decides_with_an_admin_key_only(
        browser: WebDriver, explorer: Explorer, catalog: Settings) -> None:
    a = explorer.tenants["a"]
    low, high = _hold_a_pair(catalog, a.namespace)
    pair = f"{low}|{high}"
    enter_key(browser, explorer.url, a.key)
    go(browser, "#/review")
    box = one(browser, f"[data-pair='{pair}']")
    held = explorer.get(a.key, "/v1/entities/possibly_same").json()["pairs"]
    assert [str(e.get_attribute("data-pair")) for e in css(browser, "[data-pair]")] == [
        f"{p['from']['id']}|{p['to']['id']}" for p in held]
    mine = next(p for p in held if (p["from"]["id"], p["to"]["id"]) == (low, high))
    shown = box.text
    assert mine["from"]["name"] in shown and mine["to"]["name"] in shown
    assert all(s["name"] in shown for s in mine["shared_neighbours"])
    # a read key: the buttons answer with a clear message, nothing is decided
    box.find_element("css selector", "[data-decision=defer]").click()
    assert "admin" in one(browser, f"[data-pair='{pair}'] [data-test=need-admin]").text
    screenshot(browser, "review")
    # the curator defers it: the pair leaves the held list for the deferred one
    enter_key(browser, explorer.url, explorer.curator_key)
    go(browser, "#/review")
    one(browser, f"[data-pair='{pair}'] [data-decision=defer]").click()
    assert "deferred" in one(browser, f"[data-pair='{pair}'] [data-test=decided]").text
    deferred = explorer.get(a.key, "/v1/entities/possibly_same?status=deferred").json()
    assert (low, high) in {(p["from"]["id"], p["to"]["id"]) for p in deferred["pairs"]}
    go(browser, "#/review?status=deferred")
    one(browser, f"[data-pair='{pair}']")
