"""Conversation-memory tests (issue 12): the memory events and reads on the real stack, two
tenants everywhere. Shared fixtures come from the root conftest (`stack_settings`, `catalog`,
`procs`, `publisher`); the API client here is bound to two tenants of its own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from pipeline.domain.settings import Settings


@dataclass
class Tenant:
    namespace: uuid.UUID
    key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


@pytest.fixture(scope="session")
def mem_tenants() -> dict[str, Tenant]:
    return {name: Tenant(uuid.uuid4(), f"mem-{name}-{uuid.uuid4().hex[:8]}")
            for name in ("a", "b")}


@pytest.fixture(scope="session")
def mem_client(catalog: Settings, mem_tenants: dict[str, Tenant]) -> Iterator[TestClient]:
    """The API over the test stack, with one key per tenant (short write-through wait)."""
    settings = catalog.model_copy(update={
        "api_keys": {t.key: [str(t.namespace)] for t in mem_tenants.values()},
        "memory_write_wait": 15.0})
    with TestClient(create_app(settings)) as client:
        yield client
