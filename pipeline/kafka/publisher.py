"""Publishing events: the small producer API and `brainstream publish FILE.jsonl`.

Records are keyed by aggregate id (schemas.events.record_key) so one object's events stay in order.
Lines that are not valid events are still published, unchanged and unkeyed: the consumer
dead-letters them with their reason, which is where a publisher looks for what went wrong.
Given a publisher key (`pipeline.kafka.signing`), every record sent is signed with it.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError

from pipeline.domain.errors import InvalidInput, Unavailable
from pipeline.kafka.signing import Signer
from schemas.events import (
    DEFAULT_MAX_BYTES,
    looks_like_envelope,
    parse_event,
    record_key,
    wrap_bare_object,
)


@dataclass
class PublishReport:
    sent: int = 0
    wrapped: int = 0
    unparsed: int = 0  # sent as is; the consumer will dead-letter them


def prepare_line(line: str, *, namespace: uuid.UUID | None, source: str,
                 line_no: int = 0, max_bytes: int = DEFAULT_MAX_BYTES
                 ) -> tuple[bytes | None, bytes, bool, bool]:
    """(key, value, wrapped, valid) for one JSONL line."""
    try:
        obj: Any = json.loads(line)
    except ValueError:
        return None, line.encode("utf-8", "surrogatepass"), False, False
    wrapped = False
    if isinstance(obj, dict) and not looks_like_envelope(obj):
        if namespace is None:
            raise InvalidInput(f"line {line_no}: a bare object needs --namespace to be wrapped "
                               "in a put event", field="namespace")
        obj = wrap_bare_object(obj, namespace, source)
        wrapped = True
        line = json.dumps(obj, ensure_ascii=False)
    value = line.encode("utf-8", "surrogatepass")
    try:
        event = parse_event(value, max_bytes=max_bytes)
    except InvalidInput:
        return None, value, wrapped, False
    return record_key(event), value, wrapped, True


class EventPublisher:
    """Sends events to the input topic, signed when given a `signer`; `flush` waits until the
    broker acknowledged them all. Events are checked against `max_event_bytes`, the consumer's
    limit (MAX_EVENT_BYTES)."""

    def __init__(self, producer: KafkaProducer, topic: str, signer: Signer | None = None, *,
                 max_event_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.producer = producer
        self.topic = topic
        self.signer = signer
        self.max_event_bytes = max_event_bytes
        self._pending: list[Any] = []

    @property
    def pending(self) -> list[Any]:
        """The send futures not yet flushed, in send order."""
        return self._pending

    def send(self, value: bytes, key: bytes | None = None) -> None:
        headers = self.signer.sign(key, value) if self.signer is not None else None
        try:
            self._pending.append(self.producer.send(self.topic, key=key, value=value,
                                                    headers=headers))
        except KafkaError as exc:
            raise Unavailable(f"cannot publish to {self.topic}: {exc}") from exc

    def send_event(self, envelope: dict[str, Any]) -> None:
        """Validate and send one envelope (raises InvalidInput for a bad one)."""
        value = json.dumps(envelope, ensure_ascii=False).encode()
        self.send(value, record_key(parse_event(value, max_bytes=self.max_event_bytes)))

    def flush(self, timeout: float = 60.0) -> None:
        try:
            self.producer.flush(timeout=timeout)
            for future in self._pending:
                future.get(timeout=timeout)
        except KafkaError as exc:
            raise Unavailable(f"publishing to {self.topic} failed: {exc}") from exc
        finally:
            self._pending.clear()

    def publish_lines(self, lines: Iterable[str], *, namespace: uuid.UUID | None,
                      source: str) -> PublishReport:
        """Publish JSONL lines (blank lines skipped); bare objects are wrapped as puts."""
        report = PublishReport()
        prepared = list(_prepare_all(lines, namespace=namespace, source=source,
                                     max_bytes=self.max_event_bytes))
        for key, value, wrapped, valid in prepared:
            self.send(value, key)
            report.sent += 1
            report.wrapped += int(wrapped)
            report.unparsed += int(not valid)
        self.flush()
        return report


def _prepare_all(lines: Iterable[str], *, namespace: uuid.UUID | None, source: str,
                 max_bytes: int) -> list[tuple[bytes | None, bytes, bool, bool]]:
    # Prepared up front so a file with an unwrappable bare object sends nothing at all.
    return [prepare_line(raw.rstrip("\r\n"), namespace=namespace, source=source,
                         line_no=number, max_bytes=max_bytes)
            for number, raw in enumerate(lines, start=1) if raw.strip()]


def read_lines(path: Path) -> list[str]:
    with path.open(encoding="utf-8", errors="surrogateescape") as handle:
        return handle.readlines()


class LazyPublisher:
    """An `EventPublisher` made on first use and shared by threads, one send-and-flush at a time:
    what the API publishes through (memory's write-through, curators' decisions), so the API
    starts and serves reads while the broker is down."""

    def __init__(self, make_publisher: Callable[[], EventPublisher], *,
                 timeout: float) -> None:
        self._make = make_publisher
        self._publisher: EventPublisher | None = None
        self._lock = threading.Lock()
        self.timeout = timeout

    def publish(self, envelope: dict[str, Any]) -> None:
        """Send one event and wait until the broker has it (`Unavailable` when it does not
        answer within the timeout; `InvalidInput` for an event the schemas refuse)."""
        self.publish_all([envelope])

    def publish_all(self, envelopes: Sequence[dict[str, Any]]) -> None:
        """Send the events in order and wait once until the broker has them all (one flush:
        a request of many events does not pay a round trip each). The caller validates them
        first: `InvalidInput` here means those before the refused one were sent."""
        with self._lock:
            if self._publisher is None:
                try:
                    self._publisher = self._make()
                except Exception as exc:  # no broker to bootstrap from (NoBrokersAvailable)
                    raise Unavailable(f"cannot connect a producer: {exc}") from exc
            for envelope in envelopes:
                self._publisher.send_event(envelope)
            self._publisher.flush(timeout=self.timeout)

    def close(self) -> None:
        """Close the producer, if one was made."""
        with self._lock:
            if self._publisher is not None:
                self._publisher.producer.close()
                self._publisher = None
