"""Poison events (issue 10, items 1 and 6): each is dead-lettered with its code, and the next event
on the same partition (the same key) is applied, so no event can stall ingestion.

Before the fix each of these crash-looped the consumer: the database refusing one event's data
(a tsvector over 1 MB is SQLSTATE 54000, filed by psycopg under OperationalError) was taken for an
outage and the batch retried forever; a record timestamp past 9999 and a deferred link whose
headers the store refused raised outside the per-event guard; a record carrying the
replay-marker header was skipped unseen, whatever it held.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import secrets
import string
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest

from pipeline.kafka.markers import H_MARKER, marker_record
from pipeline.ops import dlq
from pipeline.settings import Settings
from tests.pipelineutil import Proc, Publisher, envelope, put, read_topic, wait_for

pytestmark = pytest.mark.stack

YEAR_10000_MS = 253_402_300_800_000  # 10000-01-01T00:00:00Z


@dataclass
class Poison:
    """One hostile record, tagged (`tag` is somewhere in its value) so its dead letter is found."""

    value: bytes
    tag: str
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    timestamp_ms: int | None = None


def _send(publisher: Publisher, poison: Poison, key: str) -> None:
    publisher.producer.send(publisher.topic, key=key.encode(), value=poison.value,
                            headers=poison.headers, timestamp_ms=poison.timestamp_ms
                            ).get(timeout=30)


def _dead_letter(settings: Settings, tag: str) -> dict[str, str] | None:
    for _, value, headers in read_topic(settings, settings.topic_dlq, timeout_ms=1500):
        if tag.encode() in value:
            return headers
    return None


def _applied(settings: Settings, object_id: str) -> bool:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute("SELECT count(*) FROM objects WHERE id = %s", (object_id,)).fetchone()
    return bool(row and row[0])


def _then_the_next_event_applies(settings: Settings, publisher: Publisher, poison: Poison,
                                 key: str, ns: uuid.UUID) -> dict[str, str]:
    """Send the poison and a good put behind it on the same key; wait for the good one and the
    poison's dead letter; the dead letter's headers."""
    _send(publisher, poison, key)
    good = put(ns, title=f"after {poison.tag}")
    publisher.send(good, key)
    wait_for(lambda: _applied(settings, good["data"]["id"]), timeout=30,
             what="the event behind the poison on the same partition")
    letter = wait_for(lambda: _dead_letter(settings, poison.tag), timeout=15,
                      what=f"the dead letter of {poison.tag}")
    assert letter["brainstream.source.topic"] == settings.topic_events
    return letter


def _words() -> Iterator[str]:
    """Distinct lowercase 5-letter words (no two stem alike often enough to matter)."""
    for letters in itertools.product(string.ascii_lowercase, repeat=5):
        yield "".join(letters)


def _huge_tsvector_content(n_words: int = 60_000) -> str:
    """About 720 KB whose tsvector holds about 1.26 MB of lexemes: each hyphenated word is
    indexed whole and by its parts, over Postgres' 1 MB (1,048,575 bytes) tsvector limit."""
    words = _words()
    return " ".join(f"{next(words)}-{next(words)}" for _ in range(n_words))


def _tagged_put(ns: uuid.UUID, tag: str, **data: Any) -> dict[str, Any]:
    return put(ns, title=tag, **data)


def test_a_tsvector_over_postgres_limit_is_rejected_by_the_database(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    ns, tag = uuid.uuid4(), f"huge-tsvector-{uuid.uuid4().hex}"
    event = _tagged_put(ns, tag, content=_huge_tsvector_content())
    raw = json.dumps(event).encode()
    assert len(raw) < catalog.max_event_bytes  # the schema and the size limit let it through
    letter = _then_the_next_event_applies(catalog, publisher, Poison(raw, tag),
                                          event["data"]["id"], ns)
    assert letter["brainstream.error.code"] == "rejected_by_database"
    assert "(SQLSTATE 54000)" in letter["brainstream.error.message"]
    assert letter["brainstream.event.id"] == event["id"]
    assert not _applied(catalog, event["data"]["id"])


@pytest.mark.parametrize("attribute", ["id", "source"])
def test_an_envelope_attribute_over_its_limit_is_an_invalid_envelope(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher, attribute: str) -> None:
    ns, tag = uuid.uuid4(), f"long-{attribute}-{uuid.uuid4().hex}"
    event = _tagged_put(ns, tag)
    # 8,000 characters that do not compress: too big for the processed-event ledger's index row
    event[attribute] = secrets.token_hex(4_000)
    letter = _then_the_next_event_applies(catalog, publisher,
                                          Poison(json.dumps(event).encode(), tag),
                                          event["data"]["id"], ns)
    assert (letter["brainstream.error.code"], letter["brainstream.error.field"]) == (
        "invalid_envelope", attribute)
    assert "at most 256 characters" in letter["brainstream.error.message"]


@pytest.mark.parametrize(("data", "field_name"), [
    ({"title": "t" * 2_001}, "data.title"),
    ({"summary": "s" * 20_001}, "data.summary"),
    ({"properties": {"industry": "i" * 10_001}}, "data.properties.industry"),
])
def test_a_payload_field_over_its_limit_is_an_invalid_payload(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher,
        data: dict[str, Any], field_name: str) -> None:
    ns, tag = uuid.uuid4(), f"long-field-{uuid.uuid4().hex}"
    event = put(ns, kind="company", **{"title": tag, **data}, content_type=tag)
    letter = _then_the_next_event_applies(catalog, publisher,
                                          Poison(json.dumps(event).encode(), tag),
                                          event["data"]["id"], ns)
    assert (letter["brainstream.error.code"], letter["brainstream.error.field"]) == (
        "invalid_payload", field_name)


def test_a_record_timestamp_past_9999_is_dead_lettered(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    ns, tag = uuid.uuid4(), f"year-10000-{uuid.uuid4().hex}"
    event = _tagged_put(ns, tag)
    letter = _then_the_next_event_applies(
        catalog, publisher, Poison(json.dumps(event).encode(), tag, timestamp_ms=YEAR_10000_MS),
        event["data"]["id"], ns)
    assert letter["brainstream.error.code"] == "invalid_record_time"
    assert not _applied(catalog, event["data"]["id"])


def test_a_deferred_link_whose_headers_the_store_refuses_is_dead_lettered(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    ns, tag = uuid.uuid4(), f"nul-header-{uuid.uuid4().hex}"
    origin = put(ns, kind="company", title="link origin")
    key = origin["data"]["id"]
    publisher.send(origin, key)
    # its `to` does not exist (yet): the link is deferred, stored with its headers
    link = envelope("link.put", ns, {"from": key, "to": str(uuid.uuid4()),
                                     "relation_type": "knows", "meta": {"note": tag}})
    poison = Poison(json.dumps(link).encode(), tag, headers=[("trace\x00id", b"1")])
    letter = _then_the_next_event_applies(catalog, publisher, poison, key, ns)
    assert letter["brainstream.error.code"] == "rejected_by_database"
    assert "SQLSTATE 22P05" in letter["brainstream.error.message"]


def test_a_record_that_only_claims_to_be_a_replay_marker_is_dead_lettered(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    ns, tag = uuid.uuid4(), f"forged-marker-{uuid.uuid4().hex}"
    hidden = _tagged_put(ns, tag)
    key = hidden["data"]["id"]
    letter = _then_the_next_event_applies(
        catalog, publisher, Poison(json.dumps(hidden).encode(), tag, headers=[(H_MARKER, b"1")]),
        key, ns)
    assert (letter["brainstream.error.code"], letter["brainstream.error.field"]) == (
        "forged_replay_marker", H_MARKER)
    assert letter[H_MARKER] == "1"  # the original headers travel with the dead letter
    assert not _applied(catalog, key)
    # the replay's own marker is still skipped quietly: no dead letter, the next event applies
    _, value, headers = marker_record(9_876_543_210, 0)
    publisher.producer.send(publisher.topic, key=key.encode(), value=value,
                            headers=headers).get(timeout=30)
    good = put(ns, title="after a genuine marker")
    publisher.send(good, key)
    wait_for(lambda: _applied(catalog, good["data"]["id"]), timeout=30, what="the next event")
    assert _dead_letter(catalog, "replay-marker-g9876543210") is None


def test_a_record_too_big_to_dead_letter_whole_is_dead_lettered_cut(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    """From a producer with larger limits than ours: the broker refused its letter whole (over
    the producer's `max_request_size`), and the batch was retried forever."""
    ns, tag = uuid.uuid4(), f"oversize-{uuid.uuid4().hex}"
    value = tag.encode() + b"x" * (3 * catalog.max_event_bytes)
    letter = _then_the_next_event_applies(catalog, publisher, Poison(value, tag), tag, ns)
    assert letter["brainstream.error.code"] == "payload_too_large"
    assert letter["brainstream.value.truncated"] == str(len(value))


def test_a_letter_with_a_large_key_and_headers_is_cut_whole_and_lands(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    """Issue 35 item 11: an invalid record near MAX_EVENT_BYTES with a large key and large
    headers. Its letter kept key and headers whole and cut only the value, over what the broker
    takes: retried until the consumer gave up, then restarted on the same offset forever. Now
    the whole letter fits, what was cut is named by size and sha256, and the events behind it
    flow."""
    ns, tag = uuid.uuid4(), f"bigkey-{uuid.uuid4().hex}"
    value = tag.encode() + b"x" * (catalog.max_event_bytes - 100)  # not JSON
    key = tag + "k" * (catalog.max_event_bytes * 7 // 10)
    headers = [(f"trace-{i}", b"h" * (catalog.max_event_bytes * 3 // 10)) for i in range(3)]
    letter = _then_the_next_event_applies(catalog, publisher, Poison(value, tag, headers), key,
                                          ns)
    assert letter["brainstream.error.code"] == "malformed_json"
    assert letter["brainstream.key.truncated"] == str(len(key.encode()))
    assert letter["brainstream.key.sha256"] == hashlib.sha256(key.encode()).hexdigest()
    assert letter["brainstream.value.truncated"] == str(len(value))
    assert letter["brainstream.value.sha256"] == hashlib.sha256(value).hexdigest()
    assert int(letter["brainstream.headers.dropped"]) >= 1
    # a cut letter holds less than the event: `dlq retry` leaves it (the source offset has it)
    cut = next(d for d in dlq.read_all(catalog) if tag.encode() in d.value)
    assert dlq.retry(catalog, [cut])["cut"] == 1
