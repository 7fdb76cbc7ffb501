"""Fixtures of the entity projection tests: a fresh migrated database and a fresh graph per test,
so the extraction stage of the running pipeline never touches the rows a test fills by hand."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from pipeline.domain.settings import Settings
from pipeline.graph.falkordb.schema import connect, prepare_graph
from tests.entities.projutil import settings_for
from tests.pipeline.conftest import db

__all__ = ["db"]


@pytest.fixture()
def proj_settings(db: psycopg.Connection[Any], stack_settings: Settings) -> Iterator[Settings]:
    """Settings on the fresh database `db` and a fresh, prepared graph (deleted afterwards)."""
    settings = settings_for(db.info.dsn, stack_settings)
    prepare_graph(settings)
    yield settings
    connect(settings).select_graph(settings.graph_name).delete()
