"""Facets and sorting through the API on the real stack, on both lexical engines, two tenants:
counts are objects of the caller's namespace only (a note's three matching parts count once;
tenant B's look-alike rows never), over the whole match set (the fused lists hold at most two
hits per channel here, the match set more), and a sorted answer pages with `continue`."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from pipeline.settings import Settings
from tests.apiutil import ApiTenant, api_client, ok, read_side
from tests.pipelineutil import envelope, ingest, put
from tests.stackutil import fresh_database

pytestmark = pytest.mark.stack

WORD = "harbor"
LONG = " ".join(["quay crane logistics schedule berth tide pilot"] * 12) + f" {WORD}"


def _part(ns: uuid.UUID, parent: str, position: int, content: str) -> dict[str, Any]:
    return envelope("object.put", ns, {"kind": "note", "parent_id": parent,
                                       "position": position, "content": content})


def _tenant_a(ns: uuid.UUID) -> tuple[list[dict[str, Any]], dict[str, str]]:
    deals = {
        # 2024-01-15T01:00+02:00 is 2024-01-14T23:00Z: before d3 although it reads later
        "d1": ("Harbor crane deal", "prospect", 5, "2024-01-15T01:00:00+02:00", ""),
        "d2": ("Quay deal", "won", 15, "2024-02-01", LONG),  # ranks low: one word in many
        "d3": ("Harbor harbor berth", "won", 12, "2024-01-14T23:30:00Z", ""),
        "d4": ("Harbor tug deal", "lost", 25, None, ""),
    }
    events, ids = [], {}
    for key, (title, stage, amount, close, summary) in deals.items():
        props: dict[str, Any] = {"stage": stage, "amount": amount}
        if close is not None:
            props["close_date"] = close
        event = put(ns, kind="deal", title=title, summary=summary or None, properties=props)
        events.append(event)
        ids[key] = event["data"]["id"]
    note = put(ns, kind="note", title="Crane notes", properties={"author": "kim"})
    ids["n1"] = note["data"]["id"]
    events += [note, *(_part(ns, ids["n1"], i, f"{WORD} shift {i} log") for i in range(3))]
    mill = put(ns, kind="company", title="Inland mill", properties={"industry": "paper"})
    ghost = put(ns, kind="deal", title="Harbor ghost", properties={"stage": "won"})
    ids["mill"], ids["ghost"] = mill["data"]["id"], ghost["data"]["id"]
    events += [mill, ghost, envelope("object.soft_delete", ns, {"id": ids["ghost"]})]
    return events, ids


def _tenant_b(ns: uuid.UUID) -> list[dict[str, Any]]:
    return [put(ns, kind="deal", title=f"Harbor deal {i}", properties={"stage": "won",
                                                                        "amount": 99})
            for i in range(3)] + [put(ns, kind="company", title="Harbor Inc")]


@pytest.fixture(scope="module", params=["tantivy", "postgres"])
def env(request: pytest.FixtureRequest, stack_settings: Settings,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data_dir: Path = tmp_path_factory.mktemp(f"facets-{request.param}")
    settings = fresh_database(stack_settings, "facets", example_catalog=True,
                              lexical_engine=request.param, data_dir=data_dir)
    a, b = (ApiTenant(uuid.uuid4(), f"key-{uuid.uuid4().hex[:8]}") for _ in range(2))
    events, ids = _tenant_a(a.namespace)
    ingest(settings, events + _tenant_b(b.namespace))
    # two hits per channel: the match set reaches beyond the fused lists
    with read_side(search={"candidate_k": 2}), api_client(settings, [a, b]) as client:
        yield {"client": client, "a": a, "b": b, "ids": ids}


def _post(env: dict[str, Any], path: str, body: dict[str, Any], tenant: str = "a") -> Any:
    client: TestClient = env["client"]
    return client.post(path, json=body, headers=env[tenant].headers)


def _counts(facet: dict[str, Any]) -> list[tuple[Any, int]]:
    return [(b.get("value", b.get("from")), b["count"]) for b in facet["buckets"]]


FACETS = [{"field": "kind"}, {"field": "$.stage"}, {"field": "$.amount", "interval": 10},
          {"field": "$.close_date", "interval": "month"}]


def test_facets_count_objects_of_the_match_set_in_the_callers_namespace(
        env: dict[str, Any]) -> None:
    page = ok(_post(env, "/v1/find_exact", {"query": WORD, "facets": FACETS}))
    facets = page["facets"]
    assert _counts(facets["kind"]) == [("deal", 4), ("note", 1)]
    assert facets["kind"]["other"] == 0
    assert _counts(facets["$.stage"]) == [("won", 2), ("lost", 1), ("prospect", 1)]
    assert facets["$.amount"]["buckets"] == [{"from": 0, "to": 10, "count": 1},
                                             {"from": 10, "to": 20, "count": 2},
                                             {"from": 20, "to": 30, "count": 1}]
    assert facets["$.close_date"]["buckets"] == [
        {"from": "2024-01-01T00:00:00Z", "to": "2024-02-01T00:00:00Z", "count": 2},
        {"from": "2024-02-01T00:00:00Z", "to": "2024-03-01T00:00:00Z", "count": 1}]
    # B holds look-alikes: its own counts, never A's
    other = ok(_post(env, "/v1/find_exact", {"query": WORD, "facets": FACETS}, "b"))["facets"]
    assert _counts(other["kind"]) == [("deal", 3), ("company", 1)]
    assert _counts(other["$.stage"]) == [("won", 3)]
    # size and other; filters and scope narrow the match set; later pages carry no facets
    small = ok(_post(env, "/v1/find_exact", {"query": WORD, "limit": 1,
                                             "facets": [{"field": "kind", "size": 1}]}))
    assert small["facets"]["kind"] == {"buckets": [{"value": "deal", "count": 4}], "other": 1}
    assert small["has_more"]
    later = ok(_post(env, "/v1/continue", {"result_set_id": small["result_set_id"]}))
    assert later["facets"] is None
    year = datetime.now(UTC).year
    created = ok(_post(env, "/v1/find_exact", {"query": WORD, "facets": [
        {"field": "created_at", "interval": "year"}]}))["facets"]["created_at"]
    assert created == {"buckets": [{"from": f"{year}-01-01T00:00:00Z",
                                    "to": f"{year + 1}-01-01T00:00:00Z", "count": 5}],
                       "other": 0}
    won = ok(_post(env, "/v1/find_exact", {"query": WORD, "filters": {"stage": "won"},
                                           "facets": [{"field": "kind"}]}))
    assert _counts(won["facets"]["kind"]) == [("deal", 2)]
    ids = env["ids"]
    scoped = ok(_post(env, "/v1/find_exact", {"query": WORD, "scope_ids": [ids["d1"], ids["n1"]],
                                              "facets": [{"field": "kind"}]}))
    assert _counts(scoped["facets"]["kind"]) == [("deal", 1), ("note", 1)]
    # search: the dense channel's hits join the match set, still within the namespace
    searched = ok(_post(env, "/v1/search", {"query": WORD, "filters": {"kind": "deal"},
                                            "facets": [{"field": "$.stage"}]}))
    assert _counts(searched["facets"]["$.stage"]) == [("won", 2), ("lost", 1), ("prospect", 1)]
    assert page["objects"] and all(o["id"] in ids.values() for o in page["objects"])


def _walk(env: dict[str, Any], body: dict[str, Any]) -> list[str]:
    """Every id of a sorted answer, page by page through `continue`."""
    page = ok(_post(env, "/v1/find_exact", {**body, "limit": 2}))
    out = [o["id"] for o in page["objects"]]
    while page["has_more"]:
        page = ok(_post(env, "/v1/continue", {"result_set_id": page["result_set_id"],
                                              "limit": 2}))
        out += [o["id"] for o in page["objects"]]
    return out


def test_sorting_orders_the_whole_match_set_and_pages_through_continue(
        env: dict[str, Any]) -> None:
    ids = env["ids"]
    name = {v: k for k, v in ids.items()}
    by_amount = _walk(env, {"query": WORD, "sort": {"field": "$.amount", "order": "desc"}})
    # d2 ranks low (one word in a long summary) yet comes second; the note has no amount
    assert [name[i] for i in by_amount] == ["d4", "d2", "d3", "d1", "n1"]
    # every deal has an amount: on Tantivy the index orders them (top_hits on the leads)
    deals = _walk(env, {"query": WORD, "filters": {"kind": "deal"},
                        "sort": {"field": "$.amount", "order": "desc"}})
    assert [name[i] for i in deals] == ["d4", "d2", "d3", "d1"]
    ascending = _walk(env, {"query": WORD, "sort": {"field": "$.amount"}})
    assert [name[i] for i in ascending] == ["d1", "d3", "d2", "d4", "n1"]  # missing last
    by_date = [name[i] for i in _walk(env, {"query": WORD,
                                            "sort": {"field": "$.close_date"}})]
    assert by_date[:3] == ["d1", "d3", "d2"] and set(by_date[3:]) == {"d4", "n1"}
    latest = [name[i] for i in _walk(env, {"query": WORD, "sort": {"field": "$.close_date",
                                                                   "order": "desc"}})]
    assert latest[:3] == ["d2", "d3", "d1"]
    titles = [name[i] for i in _walk(env, {"query": WORD, "sort": {"field": "title"}})]
    assert titles == ["n1", "d1", "d3", "d4", "d2"]  # Crane, Harbor c/h/t, Quay
    newest = _walk(env, {"query": WORD, "sort": {"field": "updated_at"}})
    assert sorted(newest) == sorted(by_amount)  # the same match set, in another order
    b_ids = [o["id"] for o in ok(_post(env, "/v1/find_exact", {
        "query": WORD, "sort": {"field": "$.amount"}}, "b"))["objects"]]
    assert b_ids and not set(b_ids) & set(ids.values())


@pytest.mark.parametrize(("body", "field"), [
    ({"facets": [{"field": "$.nope"}]}, "facets[0].field"),
    ({"facets": [{"field": "title"}]}, "facets[0].field"),
    ({"facets": [{"field": "$.stage", "interval": 10}]}, "facets[0].interval"),
    ({"facets": [{"field": "$.amount", "interval": "month"}]}, "facets[0].interval"),
    ({"facets": [{"field": "$.amount", "interval": "fortnight"}]}, "facets[0].interval"),
    ({"facets": [{"field": "$.amount", "interval": -1}]}, "facets[0].interval"),
    ({"facets": [{"field": "kind", "size": 101}]}, "facets[0].size"),
    ({"facets": [{"field": "kind"}, {"field": "kind"}]}, "facets[1].field"),
    ({"facets": [{"field": "kind"}] * 9}, "facets"),
    ({"facets": [{"field": "$.stage"}], "filters": {"kind": "company"}}, "facets[0].field"),
    ({"sort": {"field": "$.nope"}}, "sort.field"),
    ({"sort": {"field": "color"}}, "sort.field"),
    ({"sort": {"field": "relevance", "order": "asc"}}, "sort.order"),
    ({"sort": {"field": "title", "order": "up"}}, "sort.order"),
])
def test_bad_facets_and_sorts_are_422_naming_the_field(env: dict[str, Any],
                                                       body: dict[str, Any],
                                                       field: str) -> None:
    for path in ("/v1/search", "/v1/find_exact"):
        response = _post(env, path, {"query": WORD, **body})
        assert response.status_code == 422, response.text
        assert response.json()["error"]["field"] == field, response.text
