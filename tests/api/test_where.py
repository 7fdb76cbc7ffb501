"""`where` through the API on the real stack, on both lexical engines: ranges, exists, not and
nested and/or judge the promoted object inside every channel (a narrow filter beyond the channels'
candidate depth still fills its page, and pages on through `continue`), a part is judged by its
parent, the kind catalog types every leaf (422s naming the field), and a tenant never sees the
other's rows."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from pipeline.domain.kinds import catalog_from_dict
from pipeline.domain.read_model import Filters
from pipeline.ingest.store.catalog import apply_catalog
from pipeline.retrieval.requests import with_where
from pipeline.retrieval.store import filters as store_filters, search as store_search
from pipeline.retrieval.store.filters import MAX_WHERE_ROOTS
from pipeline.settings import Settings
from tests.apiutil import ApiTenant, api_client, ok
from tests.pipelineutil import ingest, put
from tests.stackutil import fresh_database

PRODUCTS = 80  # beyond the channels' candidate depth (50): post-filtering would come up short
CATALOG = {"kinds": [
    {"kind": "product", "is_parent": True, "fields": [
        {"name": "price", "type": "number", "operators": ["eq"]},
        {"name": "published", "type": "datetime", "operators": ["eq"]},
        {"name": "color", "type": "string", "operators": ["eq", "in"]},
        {"name": "sku", "type": "string"}]},
]}
LONG = "\n\n".join(f"## Section {i}\n\n" + "The widget manual explains gears and levers. " * 30
                   for i in range(4))


def _products(ns: uuid.UUID, extra: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    events, props = [], {}
    for i in range(PRODUCTS):
        oid = str(uuid.uuid4())
        p: dict[str, Any] = {"price": i if i % 2 else float(i) + 0.5, "sku": f"s{i}",
                             "published": f"2024-{1 + i % 12:02d}-01"}
        if i % 3 == 0:
            p["color"] = "red"
        props[oid] = p
        events.append(put(ns, id=oid, kind="product", title=f"Widget {i}",
                          summary="A widget with gears.", properties=p))
    manual = str(uuid.uuid4())
    props[manual] = {"price": 500, "published": "2025-01-01T12:00:00+02:00"}
    events.append(put(ns, id=manual, kind="product", title="Widget manual", content=LONG,
                      content_type="text/markdown", properties=props[manual]))
    if extra:
        only = str(uuid.uuid4())
        props[only] = {"price": 1000}
        events.append(put(ns, id=only, kind="product", title="Widget of B", properties={
            "price": 1000}))
    return events, props


@pytest.fixture(scope="module", params=["tantivy", "postgres"])
def env(request: pytest.FixtureRequest, stack_settings: Settings
        ) -> Iterator[tuple[TestClient, dict[str, ApiTenant], dict[str, dict[str, Any]]]]:
    settings = fresh_database(stack_settings, "where", lexical_engine=request.param)
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        apply_catalog(conn, catalog_from_dict(CATALOG))
    tenants, props = {}, {}
    for name in ("a", "b"):
        ns = uuid.uuid4()
        events, props[name] = _products(ns, extra=name == "b")
        ingest(settings, events)
        tenants[name] = ApiTenant(ns, f"key-{name}-{uuid.uuid4().hex[:8]}")
    with api_client(settings, tenants.values()) as client:
        yield client, tenants, props


def _ids(answer: dict[str, Any]) -> list[str]:
    return [o["id"] for o in answer["objects"]]


def _search(client: TestClient, tenant: ApiTenant, where: Any, path: str = "/v1/search",
            **body: Any) -> dict[str, Any]:
    return ok(client.post(path, json={"query": "widget", "where": where, **body},
                          headers=tenant.headers))


def test_a_narrow_range_fills_its_page_and_pages_on(env: Any) -> None:
    client, tenants, props = env
    a = tenants["a"]
    where = {"and": [{"jsonpath": "$.price", "gte": 60}, {"jsonpath": "$.price", "lt": 75}]}
    wanted = {i for i, p in props["a"].items() if 60 <= p["price"] < 75}
    first = _search(client, a, where, limit=10)
    assert len(first["objects"]) == 10 and first["has_more"]
    rest = ok(client.post("/v1/continue", json={"result_set_id": first["result_set_id"],
                                                "limit": 10}, headers=a.headers))
    assert set(_ids(first)) | set(_ids(rest)) == wanted and len(wanted) == 15
    exact = _search(client, a, where, path="/v1/find_exact", limit=20)
    assert set(_ids(exact)) <= wanted


def test_numbers_dates_exists_not_and_or(env: Any) -> None:
    client, tenants, props = env
    a = tenants["a"]
    cases = [
        ({"jsonpath": "$.price", "lte": 2.5}, lambda p: p["price"] <= 2.5),
        ({"jsonpath": "$.price", "eq": 5}, lambda p: p["price"] == 5),
        ({"jsonpath": "$.published", "gte": "2024-11-01T00:00:00Z"},
         lambda p: p.get("published", "") >= "2024-11"),
        ({"and": [{"jsonpath": "$.color", "exists": True},
                  {"not": {"jsonpath": "$.price", "gt": 30}}]},
         lambda p: "color" in p and p["price"] <= 30),
        ({"or": [{"jsonpath": "$.price", "gte": 78}, {"jsonpath": "$.color", "in": ["blue"]}]},
         lambda p: p["price"] >= 78),
    ]
    for where, keep in cases:
        wanted = {i for i, p in props["a"].items() if keep(p)}
        got = _search(client, a, where, limit=100)
        assert set(_ids(got)) == wanted, where


def test_a_part_is_judged_by_its_parent(env: Any) -> None:
    client, tenants, props = env
    a = tenants["a"]
    manual = next(i for i, p in props["a"].items() if p["price"] == 500)
    got = ok(client.post("/v1/search", json={"query": "gears and levers", "where": {
        "jsonpath": "$.published", "gt": "2025-01-01T09:59:59Z"}}, headers=a.headers))
    assert _ids(got) == [manual] and got["objects"][0]["evidence"]
    none = ok(client.post("/v1/search", json={"query": "gears and levers", "where": {
        "jsonpath": "$.published", "gt": "2025-01-01T10:00:00Z"}}, headers=a.headers))
    assert _ids(none) == []


def test_tenants_never_see_each_other(env: Any) -> None:
    client, tenants, props = env
    where = {"jsonpath": "$.price", "gte": 999}
    only_b = next(i for i, p in props["b"].items() if p["price"] == 1000)
    for path in ("/v1/search", "/v1/find_exact", "/v1/find_objects"):
        assert _ids(_search(client, tenants["a"], where, path=path)) == []
    assert _ids(_search(client, tenants["b"], where)) == [only_b]
    every_a = _search(client, tenants["a"], {"jsonpath": "$.price", "exists": True}, limit=50)
    assert len(every_a["objects"]) == 50 and set(_ids(every_a)) <= set(props["a"])


@pytest.mark.parametrize(("where", "field"), [
    ({"and": [{"jsonpath": "$.price", "gte": 1}, {"jsonpath": "$.price", "lt": "ten"}]},
     "where.and[1].lt"),
    ({"jsonpath": "$.sku", "eq": "s1"}, "where.jsonpath"),
    ({"jsonpath": "$.price.cents", "gt": 1}, "where.jsonpath"),
    ({"jsonpath": "$.color", "gt": "a b"}, "where.gt"),
    ({"jsonpath": "$.published", "gte": "2024-13-01"}, "where.gte"),
    ({"and": [{"or": [{"not": {"not": {"jsonpath": "$.price", "eq": 1}}}]}]},
     "where.and[0].or[0].not.not"),
    ({"or": [{"jsonpath": "$.price", "eq": i} for i in range(21)]}, "where.or[20]"),
])
def test_bad_conditions_are_422_naming_the_field(env: Any, where: Any, field: str) -> None:
    client, tenants, _ = env
    for path in ("/v1/search", "/v1/find_exact", "/v1/find_objects"):
        answer = client.post(path, json={"query": "widget", "where": where},
                             headers=tenants["a"].headers)
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["field"] == field, (path, answer.json())


def test_the_dense_channel_takes_a_wheres_objects_from_the_replica(env: Any) -> None:
    """With the Tantivy engine the dense channel lists the objects passing a narrow `where`
    from the host's replica (their properties are fast fields there) instead of testing every
    object's properties in Postgres: the listing is the tenant's passing objects, exactly, and
    the channel answers as it does from Postgres's own listing."""
    client, tenants, props = env
    services = client.app.state.services
    searcher = services.engine.searcher
    lexical_engine = services.settings.lexical_engine
    assert (searcher.where_roots_index is not None) == (lexical_engine == "tantivy")
    if searcher.where_roots_index is None:
        return
    listing = searcher.where_roots_index
    dense = services.engine.channels["dense"]
    cases = [({"jsonpath": "$.price", "lt": 10}, lambda p: p["price"] < 10),
             ({"and": [{"jsonpath": "$.color", "eq": "red"},
                       {"jsonpath": "$.published", "lt": "2024-04-01"}]},
              lambda p: p.get("color") == "red" and p["published"] < "2024-04"),
             ({"jsonpath": "$.price", "gte": 999}, lambda p: p["price"] >= 999)]
    for name, tenant in tenants.items():
        for where, keep in cases:
            filters = with_where(Filters(), where)
            wanted = {uuid.UUID(i) for i, p in props[name].items() if keep(p)}
            answer = client.portal.call(listing, tenant.namespace, filters, MAX_WHERE_ROOTS)
            assert answer is not None
            listed = answer[0]
            assert set(listed) == wanted, (name, where)
            assert len(listed) == len(set(listed))  # one lead document per object
            from_index = client.portal.call(dense.candidates, tenant.namespace, "widget gears",
                                            filters, (), 50)
            searcher.where_roots_index = None
            try:
                from_postgres = client.portal.call(dense.candidates, tenant.namespace,
                                                   "widget gears", filters, (), 50)
            finally:
                searcher.where_roots_index = listing
            assert from_index == from_postgres, (name, where)
            assert {h.id for h in from_index} <= {uuid.UUID(i) for i in props[name]}
            assert bool(from_index) == bool(wanted)
    # more than the cap pass: the listing says so (the channel then joins in SQL)
    every = with_where(Filters(), {"jsonpath": "$.price", "exists": True})
    answer = client.portal.call(listing, tenants["a"].namespace, every, 5)
    assert answer is not None and len(answer[0]) == 6


def test_objects_the_replica_has_not_caught_up_with_are_judged_in_postgres(env: Any) -> None:
    """The replica's list of a `where`'s objects is as of its cursor: an object whose change
    it has not applied is judged by Postgres (a `wait: true` write is found at once, an object
    that no longer passes is left out). Here the lag is staged: the replica's answer is given
    without one object that passes and with one that does not, each with a change log row
    beyond the cursor it reports."""
    client, tenants, props = env
    services = client.app.state.services
    searcher = services.engine.searcher
    if services.settings.lexical_engine != "tantivy":
        assert searcher.where_roots_index is None
        return
    a = tenants["a"]
    filters = with_where(Filters(), {"jsonpath": "$.price", "lt": 10})
    passing = sorted(uuid.UUID(i) for i, p in props["a"].items() if p["price"] < 10)
    failing = next(uuid.UUID(i) for i, p in props["a"].items() if p["price"] >= 10)
    late, listing = passing[0], searcher.where_roots_index
    with psycopg.connect(services.settings.effective_postgres_dsn, autocommit=True) as conn:
        logged = [conn.execute("INSERT INTO lexical_log (namespace_id, root_id) VALUES (%s, %s)"
                               " RETURNING xid::text, id", (a.namespace, oid)).fetchone()
                  for oid in (late, failing)]
    first = min((int(row[0]), int(row[1])) for row in logged if row is not None)

    async def stale(namespace: uuid.UUID, given: Filters, cap: int
                    ) -> tuple[list[uuid.UUID], tuple[int, int]] | None:
        return [r for r in passing if r != late] + [failing], (first[0], first[1] - 1)

    dense = services.engine.channels["dense"]
    searcher.where_roots_index = None
    try:
        from_postgres = client.portal.call(dense.candidates, a.namespace, "widget gears",
                                           filters, (), 50)
        searcher.where_roots_index = stale
        from_stale = client.portal.call(dense.candidates, a.namespace, "widget gears",
                                        filters, (), 50)
    finally:
        searcher.where_roots_index = listing
    assert from_stale == from_postgres
    assert late in {h.id for h in from_stale} and failing not in {h.id for h in from_stale}


def test_a_replica_far_behind_is_not_asked(env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """More lagging change log rows than the correction reads (LOG_SCAN_ROWS, here 1): the
    objects are listed in Postgres, whatever the replica says (here: a failing object it lists
    with no log row of its own, which only Postgres's listing leaves out)."""
    client, tenants, props = env
    services = client.app.state.services
    searcher = services.engine.searcher
    if services.settings.lexical_engine != "tantivy":
        return
    a = tenants["a"]
    filters = with_where(Filters(), {"jsonpath": "$.price", "lt": 10})
    passing = [uuid.UUID(i) for i, p in props["a"].items() if p["price"] < 10]
    wrong = next(uuid.UUID(i) for i, p in props["a"].items() if p["price"] >= 10)
    with psycopg.connect(services.settings.effective_postgres_dsn, autocommit=True) as conn:
        for oid in passing[:2]:
            conn.execute("INSERT INTO lexical_log (namespace_id, root_id) VALUES (%s, %s)",
                         (a.namespace, oid))
        row = conn.execute("SELECT xid::text, id FROM lexical_log ORDER BY xid DESC, id DESC"
                           " LIMIT 1 OFFSET 1").fetchone()
    assert row is not None
    cursor = (int(row[0]), int(row[1]) - 1)  # both rows beyond it

    async def stale(namespace: uuid.UUID, given: Filters, cap: int
                    ) -> tuple[list[uuid.UUID], tuple[int, int]] | None:
        return [*passing, wrong], cursor

    dense = services.engine.channels["dense"]
    listing = searcher.where_roots_index
    searcher.where_roots_index = stale
    try:
        corrected = client.portal.call(dense.candidates, a.namespace, "widget gears", filters,
                                       (), 50)
        monkeypatch.setattr(store_filters, "LOG_SCAN_ROWS", 1)
        monkeypatch.setattr(store_search, "LOG_SCAN_ROWS", 1)
        far_behind = client.portal.call(dense.candidates, a.namespace, "widget gears",
                                        filters, (), 50)
    finally:
        searcher.where_roots_index = listing
    assert wrong in {h.id for h in corrected}  # the correction trusts a listed object it
    assert wrong not in {h.id for h in far_behind}  # has no log row of; Postgres does not
    assert {h.id for h in far_behind} <= set(passing)
