"""The consumer's fetch wait is the setting's, not faust's fixed 1,500 ms
(consumers/transport.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from consumers.app import create_app
from pipeline.domain.settings import Settings


def test_the_worker_consumer_fetches_with_the_configured_wait(tmp_path: Path) -> None:
    async def wait_of(ms: int) -> int:
        settings = Settings.model_validate({"data_dir": tmp_path / str(ms),
                                            "consumer_fetch_wait_ms": ms})
        app = create_app(settings)
        delegate: Any = app.consumer
        consumer = delegate._thread._create_worker_consumer(app.transport)
        try:
            return int(consumer._fetch_max_wait_ms)
        finally:
            await consumer.stop()

    assert asyncio.run(wait_of(321)) == 321
    assert asyncio.run(wait_of(1500)) == 1500
    assert Settings.model_validate({}).consumer_fetch_wait_ms == 500
