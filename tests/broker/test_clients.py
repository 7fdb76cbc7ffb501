"""The Kafka clients in the project's environment publish to and consume from the embedded broker.

kafka-python is what the pipeline uses; aiokafka is what faust (the consumer) runs on, so both
directions of both are checked: every record published with acks=all is read back, with its key,
headers and value, by the same client; confluent-kafka (librdkafka) likewise. Debian's kcat
(librdkafka 2.0.2) fails the broker's ApiVersion handshake: docs/operations.md and the README
name it and what works instead.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition as AioPartition
from confluent_kafka import (
    Consumer as RdConsumer,
    Producer as RdProducer,
    TopicPartition as RdPartition,
)
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from bench.broker.durability import OwnBroker

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


def test_confluent_kafka_publishes_and_consumes(own_broker: OwnBroker) -> None:
    topic = f"client-confluent-{uuid.uuid4().hex[:8]}"
    own_broker.create_topic(topic, 2)
    errors: list[object] = []
    producer = RdProducer({"bootstrap.servers": own_broker.bootstrap, "acks": "all",
                           "enable.idempotence": False})
    for key, value, header in sorted(_expected(topic)):
        producer.produce(topic, value, key=key, headers=[("n", header)],
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert producer.flush(30) == 0 and errors == []
    consumer = RdConsumer({"bootstrap.servers": own_broker.bootstrap, "group.id": topic,
                           "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    got: set[tuple[bytes, bytes, bytes]] = set()
    try:
        consumer.assign([RdPartition(topic, p, 0) for p in range(2)])
        deadline = time.monotonic() + 30
        while len(got) < RECORDS and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                key, value = msg.key(), msg.value()
                header = dict(msg.headers() or [])["n"]
                assert isinstance(key, bytes) and isinstance(value, bytes)
                assert isinstance(header, bytes)
                got.add((key, value, header))
    finally:
        consumer.close()
    assert got == _expected(topic)
