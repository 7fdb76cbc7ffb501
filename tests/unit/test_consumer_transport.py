"""The consumer's fetch wait is the pipeline's (CONSUMER_FETCH_WAIT_MS), not faust's fixed
1,500 ms (consumers/transport.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from consumers import app as consumer_app
from consumers.app import create_app
from pipeline.ingest.settings import CONSUMER_FETCH_WAIT_MS
from pipeline.settings import Settings


def test_the_worker_consumer_fetches_with_the_configured_wait(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def wait_of(ms: int) -> int:
        monkeypatch.setattr(consumer_app, "CONSUMER_FETCH_WAIT_MS", ms)
        settings = Settings.model_validate({"data_dir": tmp_path / str(ms)})
        app = create_app(settings)
        delegate: Any = app.consumer
        consumer = delegate._thread._create_worker_consumer(app.transport)
        try:
            return int(consumer._fetch_max_wait_ms)
        finally:
            await consumer.stop()

    assert asyncio.run(wait_of(321)) == 321
    assert asyncio.run(wait_of(1500)) == 1500
    assert CONSUMER_FETCH_WAIT_MS == 500
