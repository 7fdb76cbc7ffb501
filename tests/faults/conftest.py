"""Fault tests: each module runs its own pipeline processes so it may kill, restart and starve them.

The shared session `procs` (tests/pipeline) is never touched here. Every test uses fresh
namespaces, and every assertion is scoped to them, so earlier tests' data does not interfere.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from pipeline.kinds import load_catalog
from pipeline.settings import Settings
from pipeline.stores.postgres_kinds import apply_catalog
from tests.faults.faultutil import EXAMPLES, PIPELINE, ProcSet


@pytest.fixture(scope="session")
def fault_catalog(stack_settings: Settings) -> Settings:
    """The example kind catalog (company, deal, note), applied additively."""
    with psycopg.connect(stack_settings.effective_postgres_dsn) as conn:
        apply_catalog(conn, load_catalog((EXAMPLES / "kinds.yaml").read_text()))
    return stack_settings


@pytest.fixture(scope="module")
def pipeline_procs(fault_catalog: Settings, request: pytest.FixtureRequest
                   ) -> Iterator[ProcSet]:
    """consumer + worker + relay of this module, ready; stopped at the end of the module."""
    procs = ProcSet(fault_catalog, request.module.__name__.rsplit(".", 1)[-1])
    try:
        procs.start(*PIPELINE)
        procs.wait_ready()
        yield procs
    finally:
        procs.stop_all()
