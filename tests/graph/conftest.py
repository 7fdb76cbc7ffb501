"""Fixtures of the graph adapter tests: one fresh, prepared graph per test on the test stack,
written with the production writer and read with the asyncio reader."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from pipeline.graph.falkordb.reader import FalkorGraphReader
from pipeline.graph.falkordb.schema import connect, prepare_graph
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.settings import Settings
from tests.graph.graphutil import Ids
from tests.stackutil import make_settings


@pytest.fixture()
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture()
def graph_settings(stack_settings: Settings) -> Iterator[Settings]:
    """Settings naming a fresh, prepared graph on the test stack (deleted afterwards)."""
    settings = make_settings(graph_name=f"g_{uuid.uuid4().hex[:8]}")
    prepare_graph(settings)
    yield settings
    connect(settings).select_graph(settings.graph_name).delete()


@pytest.fixture()
def writer(graph_settings: Settings) -> FalkorGraphWriter:
    return FalkorGraphWriter(connect(graph_settings), graph_settings.graph_name)


@pytest.fixture()
async def reader(graph_settings: Settings) -> AsyncIterator[FalkorGraphReader]:
    reader = FalkorGraphReader.from_settings(graph_settings)
    yield reader
    await reader.aclose()


@pytest.fixture()
def dim(graph_settings: Settings) -> int:
    return graph_settings.vector_dim


@pytest.fixture()
def ids() -> Ids:
    return Ids()


