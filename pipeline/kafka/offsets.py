"""Offsets that can be trusted on any Kafka-protocol broker.

The embedded broker (tansu) reports wrong end offsets once a batch holds several records (13
records in 4 batches read back as end offset 1), so nothing here trusts `end_offsets`: the end of
a partition is found by reading from a known position until the partition runs dry, bounded in
records and time. Lag is therefore exact up to the bound and reported as a lower bound past it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kafka import KafkaConsumer, TopicPartition

from pipeline.services.settings import StackSettings


@dataclass(frozen=True)
class PartitionTail:
    partition: int
    start: int  # where counting began (the committed offset, or the beginning)
    end: int  # one past the last record seen
    exact: bool  # False when the bound stopped the count before the partition ran dry

    @property
    def count(self) -> int:
        return max(0, self.end - self.start)


def _consumer(settings: StackSettings) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=settings.effective_kafka_bootstrap,
                         group_id=None, enable_auto_commit=False, client_id="brainstream-ops",
                         fetch_max_wait_ms=50, max_poll_records=5000,
                         request_timeout_ms=15000)


def read_tails(settings: StackSettings, topic: str, starts: dict[int, int] | None = None, *,
               max_records: int = 200_000, max_seconds: float = 5.0,
               idle_seconds: float = 0.5) -> list[PartitionTail]:
    """For each partition, read from `starts[p]` (default: the beginning) to the end."""
    consumer = _consumer(settings)
    try:
        partitions = sorted(consumer.partitions_for_topic(topic) or [])
        tps = [TopicPartition(topic, p) for p in partitions]
        if not tps:
            return []
        consumer.assign(tps)
        beginnings = consumer.beginning_offsets(tps)
        start = {tp.partition: max((starts or {}).get(tp.partition, 0), beginnings[tp])
                 for tp in tps}
        for tp in tps:
            consumer.seek(tp, start[tp.partition])
        end = dict(start)
        seen = 0
        deadline = time.monotonic() + max_seconds
        last_data = time.monotonic()
        while time.monotonic() < deadline and seen < max_records:
            batch = consumer.poll(timeout_ms=100)
            if not batch:
                if time.monotonic() - last_data > idle_seconds:
                    break
                continue
            last_data = time.monotonic()
            for tp, records in batch.items():
                seen += len(records)
                end[tp.partition] = max(end[tp.partition], records[-1].offset + 1)
        exact = seen < max_records and time.monotonic() < deadline
        return [PartitionTail(p, start[p], end[p], exact) for p in partitions]
    finally:
        consumer.close()


def committed_offsets(settings: StackSettings, topic: str, group: str) -> dict[int, int]:
    """The group's committed offset per partition (partitions without a commit are absent)."""
    consumer = KafkaConsumer(bootstrap_servers=settings.effective_kafka_bootstrap,
                             group_id=group, enable_auto_commit=False,
                             client_id="brainstream-ops")
    try:
        out = {}
        for partition in sorted(consumer.partitions_for_topic(topic) or []):
            offset = consumer.committed(TopicPartition(topic, partition))
            if offset is not None:
                out[partition] = int(offset)
        return out
    finally:
        consumer.close()
