"""Kafka topic administration (kafka-python): the input, dead-letter and changes topics.

Source topics are created up front with the configured partition count because the consumers'
partition assignment (and faust's tables) expect it; an existing topic with fewer partitions is
reported rather than silently used.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

from pipeline.kafka.settings import KafkaSettings

Report = Callable[[str], None]


def _noop(_: str) -> None:
    pass


def topic_names(settings: KafkaSettings) -> list[str]:
    """The topics the pipeline owns."""
    return [settings.topic_events, settings.topic_dlq, settings.topic_changes]


def wanted_partitions(settings: KafkaSettings, name: str) -> tuple[int, str]:
    """How many partitions the pipeline creates a topic of, and the setting that says so."""
    if name == settings.topic_changes:
        return settings.topic_changes_partitions, "TOPIC_CHANGES_PARTITIONS"
    return settings.topic_partitions, "TOPIC_PARTITIONS"


def ensure_topics(settings: KafkaSettings, *, report: Report = _noop) -> dict[str, int]:
    """Create missing topics; return each topic's partition count."""
    admin = KafkaAdminClient(bootstrap_servers=settings.effective_kafka_bootstrap,
                             client_id="brainstream-admin", request_timeout_ms=15000)
    try:
        existing = set(admin.list_topics())
        missing = [name for name in topic_names(settings) if name not in existing]
        for name in missing:
            partitions, _ = wanted_partitions(settings, name)
            # a concurrent migrate may have created it first
            with contextlib.suppress(TopicAlreadyExistsError):
                admin.create_topics([NewTopic(name=name, num_partitions=partitions,
                                              replication_factor=1)])
    finally:
        admin.close()
    counts = partition_counts(settings, topic_names(settings))
    for name in topic_names(settings):
        verb = "created" if name in missing else "exists"
        note = ""
        wanted, setting = wanted_partitions(settings, name)
        if counts.get(name, 0) < wanted:
            note = (f" -- has {counts.get(name, 0)} partitions, fewer than "
                    f"BRAINSTREAM_{setting}={wanted}")
        report(f"kafka: topic {name} {verb} ({counts.get(name, 0)} partitions){note}")
    return counts


def partition_counts(settings: KafkaSettings, names: list[str]) -> dict[str, int]:
    """How many partitions each named topic has (0 when it does not exist)."""
    consumer = KafkaConsumer(bootstrap_servers=settings.effective_kafka_bootstrap,
                             client_id="brainstream-admin", request_timeout_ms=15000)
    try:
        out: dict[str, int] = {}
        for name in names:
            parts = consumer.partitions_for_topic(name)
            out[name] = len(parts) if parts else 0
        return out
    finally:
        consumer.close()
