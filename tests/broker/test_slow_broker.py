"""The fairness benchmark's slow broker (bench/fairness/slowbroker.py) carries a kafka-python
producer's whole conversation with the real broker, not just its bootstrap: the broker's
advertised port is rewritten to the proxy's, so the records themselves go through the proxy,
and they arrive intact."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from bench.broker.durability import OwnBroker
from bench.fairness.slowbroker import SlowBroker

RECORDS = 20
VALUE = 50_000  # bytes per record: far more than a bootstrap's metadata exchange


@pytest.fixture()
def proxy(own_broker: OwnBroker) -> Iterator[SlowBroker]:
    loop = asyncio.new_event_loop()
    slow = SlowBroker(own_broker.settings.kafka_port, delay=0.2)
    server = loop.run_until_complete(slow.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield slow
    finally:
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def test_a_producer_through_the_slow_broker_sends_its_records_through_it(
        own_broker: OwnBroker, proxy: SlowBroker) -> None:
    topic = f"slow-broker-{uuid.uuid4().hex[:8]}"
    own_broker.create_topic(topic, 1)
    values = {i: bytes([i]) * VALUE for i in range(RECORDS)}
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{proxy.port}", acks="all",
                             enable_idempotence=False, max_request_size=2 * VALUE)
    try:
        for i, value in values.items():
            producer.send(topic, value, key=str(i).encode())
        producer.flush(timeout=60)
    finally:
        producer.close()
    assert proxy.forwarded > RECORDS * VALUE  # the produce requests went through the proxy
    consumer = KafkaConsumer(bootstrap_servers=own_broker.bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    got: dict[int, bytes] = {}
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 30
        while len(got) < RECORDS and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                got |= {int(r.key): r.value for r in batch}
    finally:
        consumer.close()
    assert got == values
