"""Fixtures of the entity tests.

The extraction stage tests get a database of their own (migrated, with the example kind catalog),
so the session's pipeline processes, if running, never extract these rows with another extractor
while a test runs the stage itself. The resolution tests get two tenants with entities, aliases
and mentions written straight into Postgres (the extraction stage is the pipeline's; these tests
exercise what reads and rewrites its tables), and an API client whose keys include a curator of
each tenant. The projection tests get a fresh migrated database and a fresh graph per test, so
the extraction stage of the running pipeline never touches the rows a test fills by hand."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg_pool import ConnectionPool

from api.app import create_app
from pipeline.entities.names import normalise
from pipeline.graph.falkordb.schema import connect, prepare_graph
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.apiutil import ApiTenant, api_client
from tests.entities.holdutil import hold_extraction
from tests.entities.pathsutil import World
from tests.entities.projutil import settings_for
from tests.pipeline.conftest import db
from tests.pipelineutil import ingest, put
from tests.stackutil import fresh_database


@pytest.fixture(scope="module")
def edb(stack_settings: Settings) -> Settings:
    """Settings of a fresh migrated database with the example catalog (company, note...)."""
    return fresh_database(stack_settings, "entities", example_catalog=True)


@pytest.fixture(scope="module")
def epool(edb: Settings) -> Iterator[ConnectionPool]:
    pool = make_pool(edb, max_size=4)
    yield pool
    pool.close()


@dataclass
class Tenant(ApiTenant):
    curator_key: str
    notes: list[str]  # object ids whose titles the mentions point into
    entities: dict[str, uuid.UUID] = field(default_factory=dict)

    @property
    def curator(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.curator_key}"}


def add_entity(conn: psycopg.Connection[Any], tenant: Tenant, name: str, label: str = "NAME",
               *, aliases: Sequence[tuple[str, str]] = (), mentions: int = 1,
               embedding: Sequence[float] | None = None) -> uuid.UUID:
    """An entity with aliases (alias, source) and `mentions` mentions in the tenant's notes."""
    entity_id = uuid.uuid4()
    conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label, part_count)"
                 " VALUES (%s, %s, %s, %s, %s, %s)",
                 (entity_id, tenant.namespace, name, normalise(name), label, mentions))
    if embedding is not None:
        conn.execute("INSERT INTO entity_name_vectors (entity_id, namespace_id, embedding)"
                     " VALUES (%s, %s, %s)", (entity_id, tenant.namespace, list(embedding)))
    # examined already: the proposal pass of a test looks at the entities it adds itself
    conn.execute("DELETE FROM entity_proposal_queue WHERE entity_id = %s", (entity_id,))
    for alias, source in aliases:
        conn.execute("INSERT INTO entity_aliases (namespace_id, norm, alias, entity_id, source)"
                     " VALUES (%s, %s, %s, %s, %s)",
                     (tenant.namespace, normalise(alias), alias, entity_id, source))
    for i in range(mentions):
        conn.execute("INSERT INTO mentions (row_id, field, start_pos, end_pos, namespace_id,"
                     " entity_id, label, text) VALUES (%s, 'title', %s, %s, %s, %s, %s, %s)",
                     (tenant.notes[i], len(tenant.entities) * 100, len(tenant.entities) * 100
                      + len(name), tenant.namespace, entity_id, label, name))
    tenant.entities[name] = entity_id
    return entity_id


def make_tenant(settings: Settings, name: str) -> Tenant:
    """A tenant with three notes to hold mentions."""
    ns = uuid.uuid4()
    notes = [str(uuid.uuid4()) for _ in range(3)]
    ingest(settings, [put(ns, id=n, kind="note", title=f"{name} note {i}")
                      for i, n in enumerate(notes)])
    hold_extraction(settings, ns)  # the tests write this tenant's entities by hand
    return Tenant(ns, f"key-{name}-{uuid.uuid4().hex[:8]}",
                  f"curator-{name}-{uuid.uuid4().hex[:8]}", notes)


@pytest.fixture(scope="module")
def tenants(catalog: Settings) -> dict[str, Tenant]:
    return {name: make_tenant(catalog, name) for name in ("a", "b")}


@pytest.fixture(scope="module")
def base_db(catalog: Settings) -> Iterator[psycopg.Connection[Any]]:
    """The session's database (the resolution tests' tenants live there), autocommit."""
    from pgvector.psycopg import register_vector

    with psycopg.connect(catalog.effective_postgres_dsn, autocommit=True) as conn:
        register_vector(conn)
        yield conn


@pytest.fixture(scope="module")
def api_settings(catalog: Settings, tenants: dict[str, Tenant]) -> Settings:
    keys: dict[str, Any] = {}
    for n, t in tenants.items():
        keys[t.key] = [str(t.namespace)]
        keys[t.curator_key] = {"name": f"curator-of-{n}", "scopes": {str(t.namespace): ["admin"]}}
    return catalog.model_copy(update={"api_keys": keys})


@pytest.fixture(scope="module")
def client(api_settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(api_settings)) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def worlds_client(catalog: Settings, worlds: dict[str, World]) -> Iterator[TestClient]:
    """The API with a key per world of the requesting module's `worlds` fixture."""
    with api_client(catalog, worlds.values()) as test_client:
        yield test_client


__all__ = ["db"]


@pytest.fixture()
def proj_settings(db: psycopg.Connection[Any], stack_settings: Settings) -> Iterator[Settings]:
    """Settings on the fresh database `db` and a fresh, prepared graph (deleted afterwards)."""
    settings = settings_for(db.info.dsn, stack_settings)
    prepare_graph(settings)
    yield settings
    connect(settings).select_graph(settings.graph_name).delete()
