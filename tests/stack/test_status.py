"""`brainstream status` on the real services: lag and dead letters counted right even where the
broker's end offsets are wrong (several records per batch)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from pipeline.ops.status import collect
from pipeline.settings import Settings
from tests.stackutil import settings_env

pytestmark = pytest.mark.stack


def _topic(settings: Settings, name: str, partitions: int = 2) -> None:
    admin = KafkaAdminClient(bootstrap_servers=settings.effective_kafka_bootstrap)
    admin.create_topics([NewTopic(name, partitions, 1)])
    admin.close()


def test_lag_and_dead_letters_are_counted_exactly(stack_settings: Settings) -> None:
    suffix = uuid.uuid4().hex[:8]
    settings = stack_settings.model_copy(update={"topic_events": f"status-in-{suffix}",
                                                 "topic_dlq": f"status-dlq-{suffix}"})
    _topic(settings, settings.topic_events)
    _topic(settings, settings.topic_dlq)
    producer = KafkaProducer(bootstrap_servers=settings.effective_kafka_bootstrap,
                             linger_ms=50, enable_idempotence=False)
    for i in range(10):  # one multi-record batch per partition: end offsets misreport these
        producer.send(settings.topic_events, partition=i % 2, value=b"%d" % i)
    producer.flush()
    for _ in range(3):
        producer.send(settings.topic_events, partition=0, value=b"late").get(timeout=30)
        producer.send(settings.topic_dlq, partition=1, value=b"dead").get(timeout=30)
    producer.close()
    group = f"status-group-{suffix}"
    consumer = KafkaConsumer(bootstrap_servers=settings.effective_kafka_bootstrap,
                             group_id=group, enable_auto_commit=False)
    tp = TopicPartition(settings.topic_events, 0)
    consumer.assign([tp])
    consumer.commit({tp: OffsetAndMetadata(4, "", -1)})
    consumer.close()

    report = collect(settings, group=group)
    lag = {p["partition"]: p for p in report.lag["partitions"]}
    assert lag[0]["committed"] == 4 and lag[0]["end"] == 8 and lag[0]["lag"] == 4
    assert lag[1]["committed"] is None and lag[1]["lag"] == 5
    assert report.lag["total"] == 9 and report.lag["exact"]
    assert report.dead_letters["count"] == 3
    assert report.outbox["backlog"] >= 0 and "pending" in report.embedding


def test_status_cli(stack_settings: Settings) -> None:
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "status", "--json"],
                          env=settings_env(stack_settings), capture_output=True, text=True,
                          timeout=120, check=False)
    body = json.loads(done.stdout)
    assert done.returncode == (0 if body["healthy"] else 1), done.stderr
    assert [s["name"] for s in body["services"]] == ["postgres", "s3store", "broker",
                                                     "falkordb", "redis"]
    assert {"lag", "outbox", "embedding", "deferred", "dead_letters"} <= set(body)
