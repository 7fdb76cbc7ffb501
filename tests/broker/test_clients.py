"""The Kafka clients in the project's environment publish to and consume from the embedded broker.

kafka-python is what the pipeline uses; aiokafka is what faust (the consumer) runs on, so both
directions of both are checked: every record published with acks=all is read back, with its key,
headers and value, by the same client. (confluent-kafka and kcat are not installed here: see
docs/parts/broker-durability.md.)
"""

from __future__ import annotations

import asyncio
import time
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition as AioPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from bench.broker_durability import OwnBroker

RECORDS = 50


def _expected(topic: str) -> set[tuple[bytes, bytes, bytes]]:
    return {(f"k{i}".encode(), f"{topic}-{i}".encode(), str(i).encode()) for i in range(RECORDS)}


def test_kafka_python_publishes_and_consumes(own_broker: OwnBroker) -> None:
    topic = f"client-kafka-python-{uuid.uuid4().hex[:8]}"
    own_broker.create_topic(topic, 2)
    producer = KafkaProducer(bootstrap_servers=own_broker.bootstrap, acks="all",
                             enable_idempotence=False)
    try:
        for key, value, header in sorted(_expected(topic)):
            producer.send(topic, value, key=key, headers=[("n", header)])
        producer.flush(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=own_broker.bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    got: set[tuple[bytes, bytes, bytes]] = set()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(2)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 30
        while len(got) < RECORDS and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                got |= {(r.key, r.value, dict(r.headers)["n"]) for r in batch}
    finally:
        consumer.close()
    assert got == _expected(topic)


async def _aiokafka_round_trip(bootstrap: str, topic: str) -> set[tuple[bytes, bytes, bytes]]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for key, value, header in sorted(_expected(topic)):
            await producer.send_and_wait(topic, value, key=key, headers=[("n", header)])
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    got: set[tuple[bytes, bytes, bytes]] = set()
    try:
        consumer.assign([AioPartition(topic, p) for p in range(2)])
        await consumer.seek_to_beginning()
        deadline = time.monotonic() + 30
        while len(got) < RECORDS and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                got |= {(r.key, r.value, dict(r.headers)["n"]) for r in batch}
    finally:
        await consumer.stop()
    return got


def test_aiokafka_publishes_and_consumes(own_broker: OwnBroker) -> None:
    topic = f"client-aiokafka-{uuid.uuid4().hex[:8]}"
    own_broker.create_topic(topic, 2)
    assert asyncio.run(_aiokafka_round_trip(own_broker.bootstrap, topic)) == _expected(topic)
