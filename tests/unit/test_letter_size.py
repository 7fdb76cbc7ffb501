"""A dead letter fits the broker whole (issue 35, item 11): key, headers and value together stay
under the bound, the failure's headers are kept, and what was cut is named by size and sha256;
a letter the broker still refuses as too large is sent bare, not retried as an outage."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from hypothesis import given, strategies as st
from kafka.errors import MessageSizeTooLargeError

from pipeline.domain.errors import InvalidInput
from pipeline.kafka.io import FAILURE_HEADERS, H_CODE, DeadLetterWriter, dead_letter_headers
from pipeline.kafka.letter_size import (
    H_HEADERS_DROPPED,
    H_KEY_SHA256,
    H_KEY_TRUNCATED,
    H_TRUNCATED,
    H_VALUE_SHA256,
    fit_letter,
    headers_size,
)

BOUND = 100_000


def _failure(original: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    return dead_letter_headers(InvalidInput("bad " * 2000, field="data"), topic="t",
                               partition=1, offset=7, event_id="ev", original=original)


def _size(key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]) -> int:
    return len(key or b"") + len(value) + headers_size(headers)


def test_a_small_letter_is_kept_whole() -> None:
    headers = _failure([("trace", b"abc")])
    assert fit_letter(b"k", b"v", headers, own=FAILURE_HEADERS, max_bytes=BOUND) == \
        (b"k", b"v", headers)


def test_a_large_key_and_headers_leave_the_value_its_share() -> None:
    key, value = b"k" * 90_000, b'{"type": "object.put"' + b"x" * 95_000
    original = [(f"h{i}", b"y" * 9_000) for i in range(10)]
    k, v, h = fit_letter(key, value, _failure(original), own=FAILURE_HEADERS, max_bytes=BOUND)
    assert _size(k, v, h) <= BOUND
    found = dict(h)
    assert found[H_CODE] == b"invalid_input"  # the failure's headers are whole
    assert found[H_KEY_TRUNCATED] == b"90000"
    assert found[H_KEY_SHA256] == hashlib.sha256(key).hexdigest().encode()
    assert found[H_TRUNCATED] == str(len(value)).encode()
    assert found[H_VALUE_SHA256] == hashlib.sha256(value).hexdigest().encode()
    assert int(found[H_HEADERS_DROPPED]) > 0
    assert v.startswith(b'{"type": "object.put"') and len(v) > 20_000  # a fair share


@given(key=st.integers(0, 300_000), value=st.integers(0, 300_000),
       headers=st.lists(st.integers(0, 50_000), max_size=20),
       bound=st.sampled_from([65_536, 100_000, 1_000_000]))
def test_every_letter_fits_its_bound(key: int, value: int, headers: list[int],
                                     bound: int) -> None:
    original = [(f"h{i}", b"y" * n) for i, n in enumerate(headers)]
    k, v, h = fit_letter(b"k" * key, b"v" * value, _failure(original), own=FAILURE_HEADERS,
                         max_bytes=bound)
    assert _size(k, v, h) <= bound
    assert dict(h)[H_CODE] == b"invalid_input"


class _Future:
    def __init__(self, error: Exception | None) -> None:
        self.error = error

    def get(self, timeout: float) -> None:
        if self.error is not None:
            raise self.error


class _RefusingProducer:
    """A broker whose limit is below the letter's bound: it refuses records over `limit`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.sent: list[tuple[Any, bytes, list[tuple[str, bytes]]]] = []

    def send(self, topic: str, *, key: bytes | None, value: bytes,
             headers: list[tuple[str, bytes]]) -> _Future:
        if _size(key, value, headers) > self.limit:
            return _Future(MessageSizeTooLargeError("MESSAGE_TOO_LARGE"))
        self.sent.append((key, value, headers))
        return _Future(None)

    def flush(self, timeout: float) -> None:
        pass


@pytest.mark.parametrize("limit", [20_000, 50])
def test_a_letter_the_broker_refuses_as_too_large_is_sent_bare(limit: int) -> None:
    producer = _RefusingProducer(limit)
    writer = DeadLetterWriter(producer, "dlq", max_bytes=BOUND)  # type: ignore[arg-type]
    value = b"v" * 80_000
    if limit < 100:  # not even the failure's headers fit: a configuration error, said so
        from pipeline.domain.errors import ConfigError

        with pytest.raises(ConfigError, match="message size limit"):
            writer.send([(b"key", value, _failure([]))])
        return
    writer.send([(b"key", value, _failure([]))])
    [(key, sent, headers)] = producer.sent
    assert sent == b"" and key == b""
    assert dict(headers)[H_VALUE_SHA256] == hashlib.sha256(value).hexdigest().encode()
