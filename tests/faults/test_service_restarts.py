"""Restarts of the services under a running pipeline and a publisher that keeps publishing.

The broker (and its S3 store) and Postgres are restarted mid-ingest of a mixed workload (puts
that chunk, re-puts, soft deletes, revivals, stale versions, links, link re-puts and deletes,
poison events). Afterwards the oracle (tests/faults/oracle.py) replays the log and demands that
Postgres holds exactly the state it implies, every event is applied once or dead-lettered with
its reason, nothing is duplicated, the graph matches and `brainstream verify` exits 0.

The broker restarts happen on a broker of that test only (see `own_broker_procs`). Each stopped
service is started again in a `finally`, and the faults conftest restores anything
still down after each test, so a failure here does not cascade through the shared stack.
"""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from collections.abc import Iterator

import pytest

from pipeline.kafka.topics import ensure_topics
from pipeline.services.broker import BrokerService, S3StoreService
from pipeline.services.postgres import PostgresService
from pipeline.settings import Settings
from tests.faults.faultutil import PIPELINE, ProcSet, elapsed, rows, running_procs, scalar
from tests.faults.oracle import check_published, summary
from tests.faults.workload import BackgroundPublisher, mixed_events
from tests.pipelineutil import wait_for
from tests.stackutil import TEST_DATA_DIR, TEST_PORTS, make_settings

pytestmark = [pytest.mark.stack, pytest.mark.slow]
log = logging.getLogger(__name__)

# Links may overtake their endpoints' puts (other partitions) by a whole outage: they wait.
PROC_ENV = {"BRAINSTREAM_DEFER_SECONDS": "600"}
OBJECTS = 700  # about 2,100 events per test


def _ledger(settings: Settings, ns: uuid.UUID) -> int:
    return int(scalar(settings, "SELECT count(*) FROM processed_events WHERE namespace_id = %s",
                      ns))


def _own_broker() -> Settings:
    """The embedded broker and S3 store of the broker restart test (own data dir and ports)."""
    return make_settings(TEST_DATA_DIR / "own-broker", kafka_port=TEST_PORTS["kafka_port"] + 60,
                         s3_port=TEST_PORTS["s3_port"] + 60)


@pytest.fixture()
def own_broker_procs(fault_catalog: Settings) -> Iterator[ProcSet]:
    """The pipeline on a broker (and S3 store) of this test only, over the shared Postgres,
    Redis and FalkorDB: the restarts of this test (and anything they might leave behind, should
    the broker ever lose or reuse offsets again) never reach the shared broker the later tests
    publish to."""
    broker_settings = _own_broker()
    services = [S3StoreService(broker_settings), BrokerService(broker_settings)]
    for service in services:
        service.start()
    settings = fault_catalog.model_copy(
        update={"kafka_bootstrap": broker_settings.effective_kafka_bootstrap})
    try:
        ensure_topics(settings)
        with running_procs(settings, "test_service_restarts-broker", PROC_ENV) as procs:
            yield procs
    finally:
        for service in reversed(services):
            service.stop()
        shutil.rmtree(broker_settings.resolved_data_dir, ignore_errors=True)


def test_broker_restart_mid_ingest_loses_nothing(own_broker_procs: ProcSet) -> None:
    procs = own_broker_procs
    settings = procs.settings
    own = _own_broker()
    ns = uuid.uuid4()
    events = mixed_events(ns, OBJECTS, seed=1, label="brk")
    started = time.monotonic()
    publisher = BackgroundPublisher(settings, events).start()
    wait_for(lambda: _ledger(settings, ns) >= 300, timeout=60, interval=0.1,
             what="the consumer under way")
    broker = BrokerService(own)
    at_stop = _ledger(settings, ns)
    try:
        assert broker.stop(), "the broker was not running"
        time.sleep(2)
    finally:
        broker.start()
    log.info("broker restarted at %d applied events, publisher %d/%d acknowledged", at_stop,
             publisher.acked, len(events))
    # Twice: the second restart lands on state the first one left behind.
    wait_for(lambda: _ledger(settings, ns) >= at_stop + 300, timeout=90, interval=0.2,
             what="the consumer under way again after the broker restart")
    again = _ledger(settings, ns)
    try:
        assert broker.stop()
    finally:
        broker.start()
    log.info("broker restarted again at %d applied events, publisher %d/%d acknowledged",
             again, publisher.acked, len(events))
    # The broker's storage (s3rver) restarted under the running broker: tansu's uploads fail
    # meanwhile, so produce requests fail and the publisher sends its chunk again.
    store = S3StoreService(own)
    try:
        assert store.stop(), "the S3 store was not running"
        time.sleep(1)
    finally:
        store.start()
    publisher.wait(timeout=180)
    assert again < len(events), "the restarts came after the consumer had applied everything"
    expected = check_published(procs, ns, events)
    procs.assert_alive(*PIPELINE)
    log.info("broker restart: %s; publisher retried %d chunks; converged in %.1fs",
             summary(expected), publisher.retries, elapsed(started))


def test_postgres_restart_mid_batch_converges(pipeline_procs: ProcSet) -> None:
    procs = pipeline_procs
    settings = procs.settings
    ns = uuid.uuid4()
    events = mixed_events(ns, OBJECTS, seed=2, label="pgr")
    started = time.monotonic()
    publisher = BackgroundPublisher(settings, events).start()
    wait_for(lambda: _ledger(settings, ns) >= 300, timeout=60, interval=0.05,
             what="the consumer under way")
    # First the consumer's own connection, mid-batch; then the whole server.
    killed = rows(settings, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                  " WHERE application_name = 'brainstream-consumer'")
    at_stop = _ledger(settings, ns)
    postgres = PostgresService(settings)
    try:
        assert postgres.stop(), "postgres was not running"
        time.sleep(3)
    finally:
        postgres.start()
    log.info("postgres restarted at %d applied events (%d consumer backends terminated)",
             at_stop, len(killed))
    publisher.wait(timeout=180)
    assert at_stop < len(events), "the restart came after the consumer had applied everything"
    expected = check_published(procs, ns, events)
    procs.assert_alive(*PIPELINE)
    log.info("postgres restart: %s; converged in %.1fs", summary(expected), elapsed(started))
