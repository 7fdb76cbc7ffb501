"""Kafka producers of the pipeline (kafka-python): events in, dead letters, change events.

Dead letters keep the original key, value and headers byte for byte and add headers with the
stable error code, message, field and the record's source topic/partition/offset, so an operator
can inspect them by code and re-drive them unchanged; a letter too large for the broker is cut
to fit, what was cut named by size and sha256 (`pipeline/kafka/letter_size.py`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError, MessageSizeTooLargeError, RecordListTooLargeError
from kafka.producer.future import FutureRecordMetadata

from pipeline.domain.errors import BrainstreamError, ConfigError, Unavailable
from pipeline.kafka.letter_size import CUT_HEADERS, Letter, fit_letter, letter_bytes
from pipeline.kafka.settings import KafkaSettings

H_CODE = "brainstream.error.code"
H_MESSAGE = "brainstream.error.message"
H_FIELD = "brainstream.error.field"
H_TOPIC = "brainstream.source.topic"
H_PARTITION = "brainstream.source.partition"
H_OFFSET = "brainstream.source.offset"
H_EVENT_ID = "brainstream.event.id"
H_FAILED_AT = "brainstream.failed_at"
# the failure's headers, kept whole in every letter
FAILURE_HEADERS = frozenset({H_CODE, H_MESSAGE, H_FIELD, H_TOPIC, H_PARTITION, H_OFFSET,
                             H_EVENT_ID, H_FAILED_AT})
# every header a letter adds (dropped from a record that is re-driven or fails again)
OWN_HEADERS = FAILURE_HEADERS | CUT_HEADERS
# A letter the broker refuses as too large (its limit is below MAX_EVENT_BYTES) will be refused
# again: it is not an outage to retry, it is sent bare (the failure's headers and what was cut).
_TOO_LARGE = (MessageSizeTooLargeError, RecordListTooLargeError)


def make_producer(settings: KafkaSettings, **overrides: Any) -> KafkaProducer:
    """A durable producer: acks from all replicas, retries, ordered per partition."""
    config: dict[str, Any] = {
        "bootstrap_servers": settings.effective_kafka_bootstrap,
        "acks": "all",
        # kafka-python 3 enables idempotence by default; on the embedded broker a new idempotent
        # producer can fail InitProducerId for good after another was killed. Effects are
        # idempotent downstream, so at-least-once delivery is what we rely on anyway.
        "enable_idempotence": False,
        "retries": 10,
        "max_in_flight_requests_per_connection": 1,
        "linger_ms": 5,
        # One request per flush: with one request in flight, kafka-python sends a partition's
        # batches one round trip each (16 KiB by default), and the relay's change events of a
        # 500-row batch waited for several of the embedded broker's acknowledgements in turn
        # (publish was 3-10 s of a relay run under load).
        "batch_size": 1_048_576,
        "max_request_size": max(2 * settings.max_event_bytes, 1_048_576),
        "request_timeout_ms": 30_000,
        "client_id": "brainstream",
    }
    config.update(overrides)
    return KafkaProducer(**config)


def dead_letter_headers(
    error: BrainstreamError, *, topic: str, partition: int, offset: int,
    event_id: str | None, original: Iterable[tuple[str, bytes]] = (),
) -> list[tuple[str, bytes]]:
    """The original headers (minus ours from an earlier failure) plus the failure's."""
    headers = [(k, v) for k, v in original if k not in OWN_HEADERS]
    headers += [
        (H_CODE, error.code.encode()),
        (H_MESSAGE, error.message.encode("utf-8", "replace")[:4000]),
        (H_TOPIC, topic.encode()),
        (H_PARTITION, str(partition).encode()),
        (H_OFFSET, str(offset).encode()),
        (H_FAILED_AT, datetime.now(UTC).isoformat().encode()),
    ]
    if error.field is not None:
        headers.append((H_FIELD, error.field.encode("utf-8", "replace")))
    if event_id is not None:
        headers.append((H_EVENT_ID, event_id.encode("utf-8", "replace")))
    return headers


def header_map(headers: Sequence[tuple[str, bytes]] | None) -> dict[str, str]:
    """Headers as text, for reading dead letters."""
    return {k: v.decode("utf-8", "replace") for k, v in headers or []}


class DeadLetterWriter:
    """Sends rejected records to the dead-letter topic and waits until the broker has them.
    Each letter is cut to `max_bytes` in all (`letter_size.letter_bytes(MAX_EVENT_BYTES)`)."""

    def __init__(self, producer: KafkaProducer, topic: str, *,
                 max_bytes: int) -> None:
        self.producer = producer
        self.topic = topic
        self.max_bytes = max_bytes

    @classmethod
    def of(cls, producer: KafkaProducer, settings: KafkaSettings) -> DeadLetterWriter:
        """The writer to the installation's dead-letter topic, with its letters' bound."""
        return cls(producer, settings.topic_dlq, max_bytes=letter_bytes(settings.max_event_bytes))

    def send(self, letters: Sequence[Letter], timeout: float = 30.0) -> None:
        """(key, value, headers) each; raises Unavailable unless every one is acknowledged.
        A letter the broker refuses as too large is sent again bare (ConfigError when even
        that is refused: the broker's limit is below a few KiB)."""
        if not letters:
            return
        fitted = [fit_letter(key, value, headers, own=FAILURE_HEADERS, max_bytes=self.max_bytes)
                  for key, value, headers in letters]
        try:
            futures = [self._send(letter) for letter in fitted]
            self.producer.flush(timeout=timeout)
            for letter, future in zip(letters, futures, strict=True):
                try:
                    if future is None:
                        raise MessageSizeTooLargeError("refused before sending")
                    future.get(timeout=timeout)
                except _TOO_LARGE:
                    self._send_bare(letter, timeout)
        except KafkaError as exc:
            raise Unavailable(f"dead-letter topic {self.topic}: {exc}") from exc

    def _send(self, letter: Letter) -> FutureRecordMetadata | None:
        """The send's future, or None when the producer refused the letter as too large."""
        key, value, headers = letter
        try:
            return self.producer.send(self.topic, key=key, value=value, headers=headers)
        except _TOO_LARGE:
            return None

    def _send_bare(self, letter: Letter, timeout: float) -> None:
        """`letter` (as given) with no room for the original record: the failure's headers and
        each cut part's size and sha256."""
        key, value, headers = letter
        bare_key, bare_value, bare_headers = fit_letter(key, value, headers,
                                                        own=FAILURE_HEADERS, max_bytes=0)
        try:
            self.producer.send(self.topic, key=bare_key, value=bare_value,
                               headers=bare_headers).get(timeout=timeout)
        except _TOO_LARGE as exc:
            raise ConfigError(f"dead-letter topic {self.topic}: the broker refuses even a "
                              f"letter of its headers alone ({exc}); raise its message size "
                              "limit to MAX_EVENT_BYTES") from exc


def change_event(kind: str, namespace: uuid.UUID | str, data: dict[str, Any],
                 *, event_id: str) -> bytes:
    """A CloudEvent for the changes topic (`brainstream.object.indexed`, ...)."""
    envelope = {
        "specversion": "1.0",
        "id": event_id,
        "source": "brainstream",
        "type": f"brainstream.{kind}",
        "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "datacontenttype": "application/json",
        "namespace": str(namespace),
        "data": data,
    }
    return json.dumps(envelope, separators=(",", ":"), sort_keys=True).encode()


class KafkaChangeSink:
    """Publishes change events to the changes topic, keyed by aggregate, acknowledged."""

    def __init__(self, producer: KafkaProducer, topic: str) -> None:
        self.producer = producer
        self.topic = topic

    def publish(self, changes: Sequence[Any], timeout: float = 30.0) -> None:
        """Each `pipeline.outbox.Change`; raises Unavailable unless all are acknowledged."""
        if not changes:
            return
        try:
            futures = [
                self.producer.send(self.topic, key=c.key.encode(),
                                   value=change_event(c.type, c.namespace, c.data, event_id=c.id))
                for c in changes
            ]
            self.producer.flush(timeout=timeout)
            for future in futures:
                future.get(timeout=timeout)
        except KafkaError as exc:
            raise Unavailable(f"changes topic {self.topic}: {exc}") from exc
