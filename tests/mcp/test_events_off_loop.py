"""`POST /v1/events` validates its events (up to 500, each parsed and checked against the kind
catalog) on a worker thread, not on the event loop every other request of the process shares
(issue 35, item 12)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.routes import events as events_route
from tests.apiutil import ApiTenant


def test_admission_runs_off_the_event_loop(ev_client: TestClient,
                                           ev_tenants: dict[str, ApiTenant],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    where: list[str] = []
    admit = events_route.admit

    def watched(*args: Any, **kwargs: Any) -> Any:
        try:
            asyncio.get_running_loop()
            where.append("event loop")
        except RuntimeError:
            where.append("worker thread")
        return admit(*args, **kwargs)

    monkeypatch.setattr(events_route, "admit", watched)
    a = ev_tenants["a"]
    event = {"type": "brainstream.object.put", "id": str(uuid.uuid4()),
             "data": {"kind": "company", "title": "Off the loop"}}
    response = ev_client.post("/v1/events", json={"events": [event]}, headers=a.headers)
    assert response.status_code == 202, response.text
    assert where == ["worker thread"]
