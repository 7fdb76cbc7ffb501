"""Memory recall tests (issue 12, task D): what a message is indexed by, on the real stack, with
two tenants of their own and an API client keyed for both."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from pipeline.settings import Settings
from tests.apiutil import ApiTenant, api_client


@pytest.fixture(scope="session")
def recall_tenants() -> dict[str, ApiTenant]:
    return {name: ApiTenant(uuid.uuid4(), f"recall-{name}-{uuid.uuid4().hex[:8]}")
            for name in ("a", "b")}


@pytest.fixture(scope="session")
def recall_client(catalog: Settings, recall_tenants: dict[str, ApiTenant]
                  ) -> Iterator[TestClient]:
    with api_client(catalog, recall_tenants.values()) as client:
        yield client
