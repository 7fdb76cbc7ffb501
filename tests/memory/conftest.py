"""Conversation-memory tests (issue 12): the memory events and reads on the real stack, two
tenants everywhere. Shared fixtures come from the root conftest (`stack_settings`, `catalog`,
`procs`, `publisher`); the API client here is bound to two tenants of its own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from pipeline.settings import Settings
from tests.apiutil import ApiTenant as Tenant, api_client


@pytest.fixture(scope="session")
def mem_tenants() -> dict[str, Tenant]:
    return {name: Tenant(uuid.uuid4(), f"mem-{name}-{uuid.uuid4().hex[:8]}")
            for name in ("a", "b")}


@pytest.fixture(scope="session")
def mem_client(catalog: Settings, mem_tenants: dict[str, Tenant]) -> Iterator[TestClient]:
    """The API over the test stack, with one key per tenant (short write-through wait)."""
    with api_client(catalog, mem_tenants.values(), "write", memory_write_wait=15.0) as client:
        yield client
