"""Fault tests: each module runs its own pipeline processes so it may kill, restart and starve them.

The shared session `procs` (tests/pipeline) is never touched here. Every test uses fresh
namespaces, and every assertion is scoped to them, so earlier tests' data does not interfere.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from pipeline.domain.kinds import load_catalog
from pipeline.ingest.store.catalog import apply_catalog
from pipeline.settings import Settings
from tests.faults.faultutil import EXAMPLES, ProcSet, running_procs
from tests.stackutil import restore_stack

log = logging.getLogger("tests.faults")


@pytest.fixture(scope="session")
def fault_catalog(stack_settings: Settings) -> Settings:
    """The example kind catalog (company, deal, note), applied additively."""
    with psycopg.connect(stack_settings.effective_postgres_dsn) as conn:
        apply_catalog(conn, load_catalog((EXAMPLES / "kinds.yaml").read_text()))
    return stack_settings


@pytest.fixture(autouse=True)
def healthy_stack_after(stack_settings: Settings, request: pytest.FixtureRequest
                        ) -> Iterator[None]:
    """After each fault test, every service of the shared stack is healthy again, whatever the
    test did or where it failed: one failure must not cascade through the rest of the session."""
    yield
    restored = restore_stack(stack_settings)
    if restored:
        log.warning("%s left services down; restored %s", request.node.nodeid,
                    ", ".join(restored))


@pytest.fixture(scope="module")
def pipeline_procs(fault_catalog: Settings, request: pytest.FixtureRequest
                   ) -> Iterator[ProcSet]:
    """consumer + worker + relay of this module, ready; stopped at the end of the module.

    A module may set PROC_ENV (extra BRAINSTREAM_* variables for its processes).
    """
    env: dict[str, str] = getattr(request.module, "PROC_ENV", {})
    with running_procs(fault_catalog, request.module.__name__.rsplit(".", 1)[-1],
                       env) as procs:
        yield procs


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """Run the fault tests before everything else: once the session-wide `procs` of
    tests/pipeline run, their consumer, worker and relay would share the consumer group, the
    Celery queues and the outbox with these modules' processes (and feel their outages)."""
    here = Path(__file__).parent
    faults = [item for item in items if here in item.path.parents]
    if faults:
        others = [item for item in items if here not in item.path.parents]
        items[:] = faults + others
