"""What the API tests share: a tenant (a namespace and the key bound to it), the API client
keyed for a set of tenants, and reading a 200 answer. Each suite's tenants extend `ApiTenant`
with what they hold."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from pipeline.access import Scope, shorthand_name
from pipeline.settings import Settings
from pipeline.wiring import services


@dataclass
class ApiTenant:
    """A tenant of an API test: its namespace and the API key bound to it alone."""

    namespace: uuid.UUID
    key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


@dataclass
class Tenant(ApiTenant):
    """A tenant with the ids of its objects by name."""

    ids: dict[str, str]


def api_keys(tenants: Iterable[ApiTenant], scope: Scope = "read") -> dict[str, Any]:
    """API_KEYS binding each tenant's key to its namespace with `scope` (and those below it);
    each key is named as the shorthand would name it."""
    return {t.key: {"name": shorthand_name(t.key), "scopes": {str(t.namespace): [scope]}}
            for t in tenants}


def api_client(settings: Settings, tenants: Iterable[ApiTenant], scope: Scope = "read",
               **overrides: Any) -> TestClient:
    """The API over `settings` (with `overrides`), a key per tenant holding `scope`; enter it
    (`with`) to start the app."""
    update = {"api_keys": api_keys(tenants, scope), **overrides}
    return TestClient(create_app(settings.model_copy(update=update)))


# The product's tuned read-side constants, as imported (a module fixture's `read_side` may still
# hold its own while a test of the module starts another app).
_PRODUCT = (services.PPR, services.SEARCH)


@contextlib.contextmanager
def read_side(*, ppr: dict[str, Any] | None = None,
              search: dict[str, Any] | None = None) -> Iterator[None]:
    """Apps started inside build their read side with these changes, and only these, to the
    product's tuned constants (`pipeline/wiring/services.py`: PPR, SEARCH): a corpus of a few
    rows needs a smaller hub floor than a namespace of thousands."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(services, "PPR", replace(_PRODUCT[0], **(ppr or {})))
        patch.setattr(services, "SEARCH", replace(_PRODUCT[1], **(search or {})))
        yield


def ok(response: Any) -> dict[str, Any]:
    """The JSON of a 200 answer (the answer's text in the failure message otherwise)."""
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body
