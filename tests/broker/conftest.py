"""An S3 store and a broker of the broker tests alone (own data dir and ports): the faults these
tests inject never reach the shared stack."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from bench.broker.durability import OwnBroker
from tests.stackutil import TEST_DATA_DIR, TEST_PORTS

PORT_SHIFT = 70  # the shared stack +0, the broker-restart fault test +60, the harness +80


@pytest.fixture(scope="module")
def own_broker() -> Iterator[OwnBroker]:
    data_dir = TEST_DATA_DIR / "broker-durability"
    shutil.rmtree(data_dir, ignore_errors=True)
    own = OwnBroker(data_dir, TEST_PORTS["kafka_port"] + PORT_SHIFT,
                    TEST_PORTS["s3_port"] + PORT_SHIFT)
    own.start()
    try:
        yield own
    finally:
        own.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
