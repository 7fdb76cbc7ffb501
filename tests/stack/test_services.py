"""The embedded stack on real servers: idempotent start, durable stop/start, clear port errors,
external mode."""

from __future__ import annotations

import socket
import uuid

import falkordb
import psycopg
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from pipeline.domain.errors import PortInUse
from pipeline.services.process import port_is_free
from pipeline.services.redis import RedisService
from pipeline.services.stack import Stack
from pipeline.settings import Settings
from tests.stackutil import TEST_DATA_DIR, make_settings

pytestmark = pytest.mark.stack


def _pids(stack: Stack) -> dict[str, int | None]:
    return {s.name: s.running_pid() for s in stack.services}


def test_start_twice_is_a_noop(stack_settings: Settings) -> None:
    stack = Stack(stack_settings)
    before = _pids(stack)
    assert all(before.values()), before
    lines: list[str] = []
    stack.start(report=lines.append)
    assert _pids(stack) == before
    assert all(" running " in line for line in lines), lines
    assert all(row.healthy for row in stack.status())


def _kafka_roundtrip_setup(settings: Settings, topic: str, group: str) -> int:
    producer = KafkaProducer(bootstrap_servers=settings.effective_kafka_bootstrap)
    meta = producer.send(topic, key=b"k", value=b"durable-record").get(timeout=30)
    producer.flush()
    producer.close()
    tp = TopicPartition(topic, meta.partition)
    consumer = KafkaConsumer(bootstrap_servers=settings.effective_kafka_bootstrap,
                             group_id=group, enable_auto_commit=False)
    consumer.assign([tp])
    consumer.commit({tp: OffsetAndMetadata(meta.offset + 1, "", -1)})
    consumer.close()
    return meta.partition


def test_stop_then_start_keeps_data(stack_settings: Settings) -> None:
    settings = stack_settings
    marker = str(uuid.uuid4())
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS durability (marker text)")
        conn.execute("INSERT INTO durability VALUES (%s)", (marker,))
    graph = falkordb.FalkorDB.from_url(settings.effective_falkordb_url).select_graph("durability")
    graph.query("CREATE (:Probe {marker: $m})", {"m": marker})
    topic, group = settings.topic_events, f"durability-{marker}"
    partition = _kafka_roundtrip_setup(settings, topic, group)

    stack = Stack(settings)
    stack.stop()
    assert all(pid is None for pid in _pids(stack).values())
    for port in (settings.pg_port, settings.kafka_port, settings.s3_port,
                 settings.falkordb_port, settings.redis_port):
        assert port_is_free(port), f"port {port} still taken after stop"
    assert all(row.state == "stopped" for row in stack.status())

    stack.start()
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        rows = conn.execute("SELECT marker FROM durability WHERE marker = %s",
                            (marker,)).fetchall()
    assert rows == [(marker,)]
    graph = falkordb.FalkorDB.from_url(settings.effective_falkordb_url).select_graph("durability")
    found = graph.query("MATCH (p:Probe {marker: $m}) RETURN count(p)", {"m": marker})
    assert found.result_set == [[1]]

    tp = TopicPartition(topic, partition)
    consumer = KafkaConsumer(bootstrap_servers=settings.effective_kafka_bootstrap,
                             group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=10000)
    consumer.assign([tp])
    committed = consumer.committed(tp)
    consumer.seek_to_beginning(tp)
    values = [record.value for record in consumer]
    consumer.close()
    assert b"durable-record" in values
    assert committed is not None and committed >= 1


def test_taken_port_gives_a_clear_error(tmp_path_factory: pytest.TempPathFactory) -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        settings = make_settings(data_dir=TEST_DATA_DIR / "taken-port", redis_port=port)
        with pytest.raises(PortInUse) as err:
            RedisService(settings).start()
    message = str(err.value)
    assert str(port) in message
    assert "BRAINSTREAM_REDIS_PORT" in message
    assert RedisService(settings).running_pid() is None


def test_external_mode_starts_nothing(stack_settings: Settings) -> None:
    running = stack_settings
    data_dir = TEST_DATA_DIR / "external"
    settings = make_settings(
        data_dir=data_dir,
        postgres_dsn=running.effective_postgres_dsn,
        kafka_bootstrap=running.effective_kafka_bootstrap,
        falkordb_url=running.effective_falkordb_url,
        redis_url=running.effective_redis_url,
        # ports that would collide if anything were started
        pg_port=running.pg_port, kafka_port=running.kafka_port, s3_port=running.s3_port,
        falkordb_port=running.falkordb_port, redis_port=running.redis_port,
    )
    stack = Stack(settings)
    lines: list[str] = []
    stack.start(report=lines.append)
    assert all(" external " in line for line in lines), lines
    assert not (data_dir / "run").exists()
    rows = stack.status()
    assert [row.mode for row in rows] == ["external"] * 5
    assert all(row.healthy and row.pid is None for row in rows)
    stack.stop()  # stops nothing external
    assert all(row.healthy for row in Stack(running).status())


def test_external_broker_is_not_asked_for_an_s3store(stack_settings: Settings) -> None:
    """The embedded broker's S3 store is ours only with the embedded broker: with an external
    one (KAFKA_BOOTSTRAP), nothing listens on S3_PORT and `up` must start anyway."""
    running = stack_settings
    settings = make_settings(
        data_dir=TEST_DATA_DIR / "external-s3", postgres_dsn=running.effective_postgres_dsn,
        kafka_bootstrap=running.effective_kafka_bootstrap,
        falkordb_url=running.effective_falkordb_url, redis_url=running.effective_redis_url,
        s3_port=running.pg_port - 3)  # nothing listens there
    lines: list[str] = []
    Stack(settings).start(report=lines.append)
    s3store = next(row for row in Stack(settings).status() if row.name == "s3store")
    assert s3store.mode == "external" and s3store.healthy, s3store
    assert any(line.startswith("s3store") and "external broker" in line for line in lines), lines
