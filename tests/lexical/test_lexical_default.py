"""Tantivy is the default lexical engine: the API as a new user runs it (no LEXICAL_ENGINE set)
answers from a data directory with no index yet (a new host: /readyz says its replica is
building, and turns ready once it has built itself from Postgres, when it finds what it did not
before), and finds a part published to Kafka on the first search after the host's replica has
applied it, with a reader that was already open before the write; the other tenant does not
see it."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pipeline.lexical.replica import replica_lock
from pipeline.settings import Settings
from pipeline.wiring.lexical_follower import REPLICA_BUILDING
from tests.apiutil import ApiTenant, api_client, ok
from tests.pipelineutil import Publisher, indexed, ingest, lexical_applied, put, wait_for

pytestmark = pytest.mark.stack


def _ids(page: dict[str, Any]) -> list[str]:
    return [o["id"] for o in page["objects"]]


def _written(settings: Settings, object_id: str) -> bool:
    """Committed by the consumer, and applied by this data directory's lexical replica."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute("SELECT EXISTS (SELECT 1 FROM objects WHERE id = %s)",
                           (object_id,)).fetchone()
        return bool(row and row[0]) and lexical_applied(settings, conn, [object_id])


def test_the_default_engine_answers_before_any_index_exists(catalog: Settings,
                                                            tmp_path: Path) -> None:
    tenant = ApiTenant(uuid.uuid4(), f"key-{uuid.uuid4().hex[:8]}")
    event = put(tenant.namespace, kind="note", title="Unindexed", content="the quokka roster")
    ingest(catalog, [event])
    # a data directory no writer has written to: no index of any namespace, and its replica
    # held from building itself (this test holds its lock) until the first answers are in
    fresh = catalog.model_copy(update={"data_dir": tmp_path / "fresh"})
    assert fresh.lexical_engine == "tantivy"
    with replica_lock(fresh.resolved_data_dir, fresh.generation) as held:
        assert held
        with api_client(fresh, [tenant]) as client:
            page = ok(client.post("/v1/search", json={"query": "quokka roster"},
                                  headers=tenant.headers))
            exact = ok(client.post("/v1/find_exact", json={"query": "quokka"},
                                   headers=tenant.headers))
            ready = client.get("/readyz")
            assert ready.status_code == 503, ready.text
            assert ready.json()["dependencies"]["lexical_replica"] == "down"
            assert ready.json()["reasons"]["lexical_replica"] == REPLICA_BUILDING
    assert page["degrade"] is None
    assert event["data"]["id"] not in _ids(exact)  # find_exact asks only the lexical engine
    # released: the host's follower builds its replica from Postgres, then it is ready
    with api_client(fresh, [tenant]) as client:
        wait_for(lambda: client.get("/readyz").status_code == 200, timeout=60,
                 what="the new host's replica to build itself")
        exact = ok(client.post("/v1/find_exact", json={"query": "quokka"},
                               headers=tenant.headers))
    assert event["data"]["id"] in _ids(exact)


def test_a_published_part_is_found_on_the_first_search_after_its_commit(
        procs: dict[str, Any], catalog: Settings, publisher: Publisher) -> None:
    a, b = (ApiTenant(uuid.uuid4(), f"key-{uuid.uuid4().hex[:8]}") for _ in range(2))
    first = put(a.namespace, kind="note", title="Ledger", content="the narwhal ledger")
    publisher.send(first, first["data"]["id"])
    wait_for(lambda: indexed(catalog, first["data"]["id"]), timeout=60,
             what="the first note to be indexed")
    assert catalog.lexical_engine == "tantivy"
    with api_client(catalog, [a, b]) as client:
        # this search opens the namespace's index: the second note's commit comes after it
        assert _ids(ok(client.post("/v1/find_exact", json={"query": "walrus"},
                                   headers=a.headers))) == []
        second = put(a.namespace, kind="note", title="Roster", content="the walrus roster")
        oid = second["data"]["id"]
        publisher.send(second, oid)
        wait_for(lambda: _written(catalog, oid), timeout=60,
                 what="the host's lexical replica to apply the second note")
        found = ok(client.post("/v1/find_exact", json={"query": "walrus"}, headers=a.headers))
        assert _ids(found) == [oid]
        other = ok(client.post("/v1/find_exact", json={"query": "walrus"}, headers=b.headers))
        assert _ids(other) == []
