"""Every text field of every request body refuses NUL and the other control characters with a
422 naming the field (api/plain_text.py). The fields are read from the OpenAPI document, so a
field added to a body is covered without touching this test; an endpoint added with a body
needs a valid base body in BASES (the coverage test says which)."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from tests.api.conftest import Tenant
from tests.stackutil import make_settings

pytestmark = pytest.mark.stack

DOCUMENT = create_app(make_settings()).openapi()
MESSAGE = {"uuid": str(uuid.UUID(int=1)), "role": "user", "content": "hello"}
PATH_PARAMS = {"session_id": "plain-text", "name": "plain-text",
               "from_id": str(uuid.UUID(int=2)), "to_id": str(uuid.UUID(int=3))}
# A valid body per operation with a request body: each mutation changes one field of it, so
# the first (and only) error the API names is that field's.
BASES: dict[tuple[str, str], dict[str, Any]] = {
    ("post", "/v1/search"): {"query": "acme", "facets": [{"field": "kind"}]},
    ("post", "/v1/find_exact"): {"query": "acme", "facets": [{"field": "kind"}]},
    ("post", "/v1/continue"): {"result_set_id": "a" * 32},
    ("post", "/v1/find_objects"): {"query": "acme"},
    ("post", "/v1/find_links"): {"relation_type": "buyer", "query": "acme"},
    ("post", "/v1/expand"): {"object_id": str(uuid.UUID(int=4))},
    ("post", "/v1/expand_many"): {"object_ids": [str(uuid.UUID(int=4))]},
    ("put", "/v1/expand/recipes/{name}"): {},
    ("post", "/v1/expand/recipe/{name}"): {"object_ids": [str(uuid.UUID(int=4))]},
    ("post", "/v1/paths"): {"from": [str(uuid.UUID(int=4))], "to": [str(uuid.UUID(int=5))]},
    ("post", "/v1/resolve"): {"query": "acme"},
    ("post", "/v1/entities/search"): {"query": "acme"},
    ("post", "/v1/entities/merge"): {"from": str(uuid.UUID(int=4)),
                                     "into": str(uuid.UUID(int=5))},
    ("post", "/v1/entities/possibly_same/{from_id}/{to_id}"): {"decision": "verify"},
    ("post", "/v1/sessions/{session_id}/messages"): {"messages": [MESSAGE]},
    ("post", "/v1/sessions/{session_id}/search"): {"query": "hello"},
    ("post", "/v1/memory/search"): {"query": "hello", "user_id": "u1"},
    ("post", "/v1/events"): {"events": [{"type": "brainstream.object.put",
                                         "data": {"kind": "company", "title": "plain"}}]},
    ("post", "/v1/objects/delete"): {"source": "crm", "dry_run": True},
}
BAD = "a\x00b"


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    resolved: dict[str, Any] = DOCUMENT["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return resolved


def _is_text(schema: dict[str, Any]) -> bool:
    """A string a person writes: not an enum, a constant, a uuid or a date."""
    return (schema.get("type") == "string"
            and not {"enum", "const", "format"} & set(schema))


def _placements(schema: dict[str, Any], current: Any) -> Iterator[tuple[list[str | int], Any]]:
    """(path, value) for every text spot of a value of `schema`: the value (given `current`,
    the base's value there, or None) with BAD put at that spot."""
    schema = _resolve(schema)
    if _is_text(schema):
        yield [], BAD
    for branch in schema.get("anyOf", []):
        yield from _placements(branch, current)
    if schema.get("type") == "array":
        first = current[0] if isinstance(current, list) and current else None
        for path, value in _placements(schema.get("items", {}), first):
            rest = current[1:] if isinstance(current, list) else []
            yield [0, *path], [value, *rest]
    if schema.get("type") == "object":
        base = dict(current) if isinstance(current, dict) else {}
        for name, sub in schema.get("properties", {}).items():
            for path, value in _placements(sub, base.get(name)):
                yield [name, *path], {**base, name: value}
        extra = schema.get("additionalProperties")
        if extra is True or extra == {}:  # free JSON: a string value, then a key
            yield ["free value"], {**base, "free": {"note": BAD}}
            yield ["free key"], {**base, "free": {BAD: 1}}
        elif isinstance(extra, dict):
            for path, value in _placements(extra, None):
                yield ["extra_field", *path], {**base, "extra_field": value}


def _free_json_parent(path: list[str | int]) -> list[str | int]:
    # a free-JSON placement names the field holding the JSON ("metadata"), not a key inside
    return path[:-1] if path and str(path[-1]).startswith("free") else path


def _cases() -> list[tuple[str, str, list[str | int], dict[str, Any]]]:
    cases = []
    for route, operations in DOCUMENT["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody")
            if body is None:
                continue
            schema = body["content"]["application/json"]["schema"]
            base = BASES.get((method, route), {})
            for path, value in _placements(schema, copy.deepcopy(base)):
                cases.append((method, route, path, value))
    return cases


CASES = _cases()


def test_every_operation_with_a_body_has_a_base_body() -> None:
    with_body = {(m, r) for r, ops in DOCUMENT["paths"].items() for m, op in ops.items()
                 if "requestBody" in op}
    assert with_body == set(BASES)
    # the bodies of issue 11 and 12 that hold text are among the cases
    covered = {(m, r) for m, r, _, _ in CASES}
    assert {("post", "/v1/resolve"), ("post", "/v1/sessions/{session_id}/messages"),
            ("post", "/v1/memory/search"), ("post", "/v1/search")} <= covered


@pytest.mark.parametrize(("method", "route", "path", "body"), CASES,
                         ids=[f"{m} {r} {'.'.join(map(str, p))}" for m, r, p, _ in CASES])
def test_nul_in_any_text_field_is_a_422_naming_it(
        client: TestClient, tenants: dict[str, Tenant], method: str, route: str,
        path: list[str | int], body: dict[str, Any]) -> None:
    url = route.format(**PATH_PARAMS)
    response = client.request(method, url, json=body, headers=tenants["a"].headers)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request", error
    assert error["field"].startswith(".".join(map(str, _free_json_parent(path)))), (path, error)


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\x7f", "\x85"])
def test_control_characters_are_refused_and_tabs_and_newlines_kept(
        client: TestClient, tenants: dict[str, Tenant], char: str) -> None:
    a, b = tenants["a"], tenants["b"]
    session = f"plain-{uuid.uuid4().hex[:8]}"
    message = {**MESSAGE, "uuid": str(uuid.uuid4()), "content": f"line one{char}line two"}
    refused = client.post(f"/v1/sessions/{session}/messages", json={"messages": [message]},
                          headers=a.headers)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["field"] == "messages.0.content"
    assert f"U+{ord(char):04X}" in refused.json()["error"]["message"]
    nested = {**MESSAGE, "uuid": str(uuid.uuid4()), "metadata": {"tags": [{"x": f"y{char}"}]}}
    refused = client.post(f"/v1/sessions/{session}/messages", json={"messages": [nested]},
                          headers=a.headers)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["field"] == "messages.0.metadata"
    assert "tags[0].x" in refused.json()["error"]["message"]
    # nothing was published: the session exists for neither tenant
    for tenant in (a, b):
        assert client.get(f"/v1/sessions/{session}", headers=tenant.headers).status_code == 404
    # tab, newline and carriage return are text
    kept = client.post("/v1/search", json={"query": "acme\trobotics\r\nkickoff"},
                       headers=a.headers)
    assert kept.status_code == 200, kept.text
    assert a.ids["company"] in [o["id"] for o in kept.json()["objects"]]


def test_a_session_id_of_a_lone_nul_is_refused(client: TestClient,
                                               tenants: dict[str, Tenant]) -> None:
    # the path's pattern asked for a non-blank character, and `\S` matches NUL
    for method, suffix in (("GET", ""), ("GET", "/memory"), ("POST", "/search")):
        response = client.request(method, f"/v1/sessions/%00{suffix}",
                                  json={"query": "hello"} if method == "POST" else None,
                                  headers=tenants["a"].headers)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["field"] == "session_id"
