"""The history reads on the real stack: a link's versions (by its id and by its ends) and an
object's, each with the events that made them; another tenant's link or object is not found."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient

from pipeline.domain.links import link_id
from tests.apiutil import Tenant


def _link(t: Tenant) -> tuple[str, str, str]:
    return t.ids["deal"], "buyer", t.ids["company"]


def test_link_history_by_id_and_by_ends(client: TestClient, tenants: dict[str, Tenant]) -> None:
    a = tenants["a"]
    frm, rel, to = _link(a)
    lid = link_id(uuid.UUID(frm), rel, uuid.UUID(to))
    by_id = client.get(f"/v1/links/{lid}/history", headers=a.headers)
    assert by_id.status_code == 200, by_id.text
    body = by_id.json()
    assert (body["link_id"], body["from"], body["relation_type"], body["to"]) == \
        (str(lid), frm, rel, to)
    (version,) = body["versions"]
    assert (version["seq"], version["state"], version["change"]) == (1, "holds", "put")
    assert version["valid_from"] is None and version["invalidated_at"] is None
    assert version["meta"]["note"] == "Acme is the buying entity"
    assert version["recorded_by"].startswith("tests#")
    by_ends = client.get("/v1/links/history", params={"from": frm, "type": rel, "to": to},
                         headers=a.headers)
    assert by_ends.status_code == 200 and by_ends.json() == body


def test_link_history_stays_in_its_namespace(client: TestClient,
                                             tenants: dict[str, Tenant]) -> None:
    a, b = tenants["a"], tenants["b"]
    frm, rel, to = _link(a)
    lid = link_id(uuid.UUID(frm), rel, uuid.UUID(to))
    missing = client.get(f"/v1/links/{lid}/history", headers=b.headers)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert client.get("/v1/links/history", params={"from": frm, "type": rel, "to": to},
                      headers=b.headers).status_code == 404
    # B's own link with the same shape is B's history, not A's
    own = client.get("/v1/links/history", params=dict(zip(("from", "type", "to"), _link(b),
                                                          strict=True)), headers=b.headers)
    assert own.status_code == 200 and own.json()["from"] == b.ids["deal"]


def test_object_history_lists_each_change(client: TestClient,
                                          tenants: dict[str, Tenant]) -> None:
    a, b = tenants["a"], tenants["b"]
    got = client.get(f"/v1/objects/{a.ids['ghost']}/history", headers=a.headers)
    assert got.status_code == 200, got.text
    versions = got.json()["versions"]
    assert [v["change"] for v in versions] == ["put", "delete"]
    assert [v["seq"] for v in versions] == [1, 2]
    assert versions[0]["title"] == "Ghost Warehouse Corp" and versions[0]["kind"] == "company"
    assert versions[0]["recorded_at"] <= versions[1]["recorded_at"]
    assert client.get(f"/v1/objects/{a.ids['ghost']}/history",
                      headers=b.headers).status_code == 404


def test_schema_lists_relation_types(client: TestClient, tenants: dict[str, Tenant]) -> None:
    schema = client.get("/v1/schema", headers=tenants["a"].headers).json()
    assert isinstance(schema["relations"], list)
