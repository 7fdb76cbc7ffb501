"""A dead letter that the broker takes: the whole letter (key, headers and value) fits a bound,
and what had to be cut is named by its size and sha256 in the letter's headers.

A rejected record can be as large as the broker let its producer send, key and headers
included; a letter that kept them whole and added the failure's headers was refused by the
broker, its batch retried until the consumer gave up, and the consumer restarted on the same
offset forever. The letter's bound is MAX_EVENT_BYTES (the size the operator raises the broker's
limit to, docs/operations.md), never below `MIN_LETTER_BYTES`, so the failure's own headers
always fit. The whole record stays at its source topic, partition and offset.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

Headers = list[tuple[str, bytes]]
Letter = tuple[bytes | None, bytes, Headers]

H_TRUNCATED = "brainstream.value.truncated"  # the original value's size, when the letter cut it
H_VALUE_SHA256 = "brainstream.value.sha256"
H_KEY_TRUNCATED = "brainstream.key.truncated"  # the original key's size
H_KEY_SHA256 = "brainstream.key.sha256"
H_HEADERS_DROPPED = "brainstream.headers.dropped"  # how many original headers were left out
H_HEADERS_SHA256 = "brainstream.headers.sha256"  # of all original headers (see _headers_digest)
CUT_HEADERS = frozenset({H_TRUNCATED, H_VALUE_SHA256, H_KEY_TRUNCATED, H_KEY_SHA256,
                         H_HEADERS_DROPPED, H_HEADERS_SHA256})

# Kafka's default message.max.bytes is 1 MiB; 64 KiB holds the failure's headers (the message
# is cut at 4000 bytes) and the cut headers with room to spare.
MIN_LETTER_BYTES = 64 * 1024
# The record batch's own framing (61 bytes), the record's, and a varint per length.
_FRAMING_BYTES = 512
_PER_HEADER_BYTES = 10
# The cut headers' worst case: each name, a size of up to 20 digits, a 64-digit hex digest.
_CUT_RESERVE = sum(len(name) + _PER_HEADER_BYTES + 64 for name in CUT_HEADERS)


def letter_bytes(max_event_bytes: int) -> int:
    """The bound on a whole dead letter for an installation's MAX_EVENT_BYTES."""
    return max(max_event_bytes, MIN_LETTER_BYTES)


def headers_size(headers: Sequence[tuple[str, bytes]]) -> int:
    """What `headers` add to a record, framing included (an upper bound)."""
    return sum(len(k.encode()) + len(v) + _PER_HEADER_BYTES for k, v in headers)


def fit_letter(key: bytes | None, value: bytes, headers: Sequence[tuple[str, bytes]], *,
               own: frozenset[str], max_bytes: int) -> Letter:
    """`(key, value, headers)` cut to at most `max_bytes` in all. Headers named in `own` (the
    failure's: code, message, source offset) are kept whole; the key, the value and the other
    (original) headers share the room left max-min fairly, each kept whole when it fits its
    share, so a large key cannot crowd out the value's head (its event type and id). Each part
    that was cut gets its original size and sha256 in a header; left-out headers get their
    count and one sha256 over all original headers."""
    theirs = [(k, v) for k, v in headers if k not in own and k not in CUT_HEADERS]
    ours = [(k, v) for k, v in headers if k in own]
    room = max(0, max_bytes - _FRAMING_BYTES - _CUT_RESERVE - headers_size(ours))
    key_room, header_room, value_room = _fair_shares(
        [len(key or b""), headers_size(theirs), len(value)], room)
    cut: Headers = []
    if key is not None and len(key) > key_room:
        cut += [(H_KEY_TRUNCATED, str(len(key)).encode()),
                (H_KEY_SHA256, hashlib.sha256(key).hexdigest().encode())]
        key = key[:key_room]
    kept = _headers_within(theirs, header_room)
    if len(kept) < len(theirs):
        cut += [(H_HEADERS_DROPPED, str(len(theirs) - len(kept)).encode()),
                (H_HEADERS_SHA256, _headers_digest(theirs).encode())]
    if len(value) > value_room:
        cut += [(H_TRUNCATED, str(len(value)).encode()),
                (H_VALUE_SHA256, hashlib.sha256(value).hexdigest().encode())]
        value = value[:value_room]
    return key, value, kept + ours + cut


def _fair_shares(sizes: list[int], room: int) -> list[int]:
    """Max-min fair shares of `room` for parts of `sizes`: the smallest parts whole while they
    fit an equal share, what they leave to the larger ones."""
    shares = [0] * len(sizes)
    left = room
    order = sorted(range(len(sizes)), key=sizes.__getitem__)
    for done, index in enumerate(order):
        shares[index] = min(sizes[index], left // (len(sizes) - done))
        left -= shares[index]
    return shares


def _headers_within(headers: Headers, room: int) -> Headers:
    """The headers, in order, that fit `room`; one too large is left out, the later ones
    still may fit."""
    kept: Headers = []
    for header in headers:
        size = headers_size([header])
        if size <= room:
            kept.append(header)
            room -= size
    return kept


def _headers_digest(headers: Headers) -> str:
    """sha256 over the headers, each as its name's and value's lengths (8 bytes each, big
    endian) and bytes, so no two header lists digest alike by where one ends."""
    digest = hashlib.sha256()
    for name, value in headers:
        raw = name.encode()
        digest.update(len(raw).to_bytes(8, "big") + raw + len(value).to_bytes(8, "big") + value)
    return digest.hexdigest()
