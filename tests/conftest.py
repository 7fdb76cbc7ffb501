"""Test fixtures: the real embedded stack, started once per test run on its own ports and data dir.

The stack lives under `<repo>/.brainstream-test/` (wiped at the start of a run) and listens on
ports distinct from the development defaults, so `make test` can run beside `make up`.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings as hypothesis_settings

from pipeline.settings import Settings
from tests.pipelineutil import Proc, Publisher, indexed, pipeline_env, put, wait_for
from tests.stackutil import EXAMPLES, TEST_DATA_DIR, make_settings

# Tests never assert wall-clock times: Hypothesis's per-example deadline (200 ms by default) is
# one, and it failed test_pathological_json at 559 ms on a machine at load 30; so is the
# too_slow health check (it failed tests/unit/test_markers.py under load).
hypothesis_settings.register_profile("brainstream", deadline=None,
                                     suppress_health_check=[HealthCheck.too_slow])
hypothesis_settings.load_profile("brainstream")


@pytest.fixture(scope="session")
def stack_settings() -> Iterator[Settings]:
    """A running, migrated embedded stack for the whole test session."""
    from pipeline.graph.falkordb.schema import prepare_graph
    from pipeline.kafka.topics import ensure_topics
    from pipeline.ops.migrations import apply_migrations
    from pipeline.services.stack import Stack

    settings = make_settings()
    stack = Stack(settings)
    stack.stop()  # leftovers of an interrupted run
    if TEST_DATA_DIR.exists():
        shutil.rmtree(TEST_DATA_DIR)
    stack.start()
    try:
        apply_migrations(settings)
        prepare_graph(settings)
        ensure_topics(settings)
        yield settings
    finally:
        stack.stop()


@pytest.fixture(scope="session")
def catalog(stack_settings: Settings) -> Settings:
    """The example kind catalog, applied (a non-empty catalog: puts are validated)."""
    import psycopg

    from pipeline.domain.kinds import load_catalog
    from pipeline.ingest.store.catalog import apply_catalog

    with psycopg.connect(stack_settings.effective_postgres_dsn) as conn:
        apply_catalog(conn, load_catalog((EXAMPLES / "kinds.yaml").read_text()))
    return stack_settings


@pytest.fixture(scope="session")
def procs(catalog: Settings) -> Iterator[dict[str, Proc]]:
    """consumer + worker + extract + relay, ready (a probe put went all the way into the
    graph)."""
    settings = catalog
    env = pipeline_env(settings)
    log_dir = settings.resolved_data_dir / "proc-logs"
    running = {name: Proc(name, env, log_dir).start()
               for name in ("consumer", "worker", "extract", "relay")}
    try:
        probe = put(uuid.uuid4(), title="readiness probe")
        pub = Publisher(settings)
        pub.send(probe, probe["data"]["id"])
        pub.close()
        wait_for(lambda: indexed(settings, probe["data"]["id"]), timeout=120,
                 what="the pipeline to index a probe object")
        yield running
    finally:
        for proc in running.values():
            proc.stop()


@pytest.fixture(autouse=True)
def _revive_procs(request: pytest.FixtureRequest) -> None:
    """A test that stops the shared stack (tests/stack/test_services.py) can take a session
    process with it (a Celery worker exits when its Redis goes away mid-poll): the next test
    that needs the pipeline starts what died instead of waiting on a pipeline that is gone."""
    if "procs" in request.fixturenames:
        for proc in request.getfixturevalue("procs").values():
            if not proc.alive:
                proc.start()


@pytest.fixture()
def publisher(stack_settings: Settings) -> Iterator[Publisher]:
    pub = Publisher(stack_settings)
    yield pub
    pub.close()


@pytest.fixture(scope="module")
def sql_postings(catalog: Settings) -> Iterator[None]:
    """The session database keeps the SQL BM25 postings and vocabulary for this module (as
    `brainstream migrate` does with LEXICAL_ENGINE=postgres: rebuilt from the rows), and stops
    keeping them afterwards as the session's default engine wants (the next module starts as
    every other does)."""
    from pipeline.ops.migrations import apply_migrations

    apply_migrations(catalog.model_copy(update={"lexical_engine": "postgres"}))
    try:
        yield
    finally:
        apply_migrations(catalog)
