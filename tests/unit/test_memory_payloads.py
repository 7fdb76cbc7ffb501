"""Conversation-memory events and values (issue 12), pure logic: the payloads' rules, the record
key of a session, the summary lag, and which records may write the `system` metadata key."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import given, strategies as st

from pipeline.domain.errors import InvalidPayload
from pipeline.domain.memory_model import session_key, summary_lag, unsummarised
from pipeline.kafka.signing import PublisherKeys, Signer
from pipeline.settings import Settings
from schemas.events import parse_event, record_key
from schemas.memory import MessageMetadata, MessagesAdd, SessionPut

NS, OTHER = uuid.uuid4(), uuid.uuid4()


def _event(event_type: str, data: dict[str, Any], ns: uuid.UUID = NS) -> bytes:
    return json.dumps({"specversion": "1.0", "id": str(uuid.uuid4()), "source": "t",
                       "type": event_type, "namespace": str(ns), "data": data}).encode()


def _msg(**extra: Any) -> dict[str, Any]:
    return {"uuid": str(uuid.uuid4()), "role": "user", "content": "hi", **extra}


def test_every_event_of_a_session_has_the_session_s_key_and_tenants_differ() -> None:
    events = [_event("brainstream.session.put", {"session_id": "s"}),
              _event("brainstream.messages.add", {"session_id": "s", "messages": [_msg()]}),
              _event("brainstream.message.metadata", {"session_id": "s",
                                                      "uuid": str(uuid.uuid4()), "key": "k",
                                                      "delete": True}),
              _event("brainstream.summary.put", {"session_id": "s", "uuid": str(uuid.uuid4()),
                                                 "content": "c",
                                                 "recent_message_uuid": str(uuid.uuid4())}),
              _event("brainstream.session.delete", {"session_id": "s"})]
    keys = {record_key(parse_event(e)) for e in events}
    assert keys == {str(session_key(NS, "s")).encode()}
    other = record_key(parse_event(_event("brainstream.session.put", {"session_id": "s"},
                                          OTHER)))
    assert other not in keys


@pytest.mark.parametrize(("data", "field"), [
    ({"session_id": "s", "messages": []}, "data.messages"),
    ({"session_id": " ", "messages": [_msg()]}, "data.session_id"),
    ({"session_id": "s", "messages": [_msg(role="")]}, "data.messages[0].role"),
    ({"session_id": "s", "messages": [_msg(created_at=1700000000)]},
     "data.messages[0].created_at"),
    ({"session_id": "s", "messages": [_msg(created_at="2026-01-01T00:00:00")]},
     "data.messages[0].created_at"),  # no timezone: ambiguous
    ({"session_id": "s", "messages": [_msg(tokens=3)]}, "data.messages[0].tokens"),
])
def test_a_bad_messages_add_names_its_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidPayload) as err:
        parse_event(_event("brainstream.messages.add", data))
    assert err.value.field == field


def test_the_same_uuid_twice_in_one_add_is_refused() -> None:
    twice = _msg()
    with pytest.raises(ValueError, match="appears twice"):
        MessagesAdd(session_id="s", messages=[twice, _msg(), twice])  # type: ignore[list-item]


def test_a_metadata_event_sets_a_value_or_deletes_never_both_nor_neither() -> None:
    base = {"session_id": "s", "uuid": uuid.uuid4(), "key": "k"}
    assert MessageMetadata.model_validate({**base, "value": None}).value is None  # null is a value
    assert MessageMetadata.model_validate({**base, "delete": True}).delete
    for bad in ({}, {"value": 1, "delete": True}):
        with pytest.raises(ValueError, match="either"):
            MessageMetadata.model_validate({**base, **bad})


def test_session_metadata_may_nest_but_not_exceed_its_key_count() -> None:
    assert SessionPut(session_id="s", metadata={"a": {"b": [1, {"c": None}]}}).metadata
    with pytest.raises(ValueError):
        SessionPut(session_id="s", metadata={f"k{i}": i for i in range(257)})


@given(st.integers(0, 10_000), st.integers(0, 10_000), st.integers(2, 1000))
def test_the_summary_lag_is_what_does_not_fit_the_window(last: int, point: int,
                                                         window: int) -> None:
    point = min(point, last)
    lag = summary_lag(last, point, window)
    assert lag >= 0
    assert lag + min(window, unsummarised(last, point)) == last - point


SECRET_P, SECRET_Q = b"privileged-secret-0123456789", b"plain-secret-0123456789"
KEYS = PublisherKeys({"p": SECRET_P, "q": SECRET_Q},
                     {"p": frozenset({NS}), "q": frozenset({NS})}, frozenset({"p"}))
VALUE = b'{"type": "brainstream.message.metadata"}'


def test_only_a_valid_signature_of_a_privileged_key_of_the_namespace_is_privileged() -> None:
    signed = Signer("p", SECRET_P).sign(b"k", VALUE)
    assert KEYS.is_privileged(NS, b"k", signed, VALUE)
    assert not KEYS.is_privileged(OTHER, b"k", signed, VALUE)  # not bound there
    assert not KEYS.is_privileged(NS, b"k", signed, VALUE + b" ")  # changed after signing
    assert not KEYS.is_privileged(NS, b"k", Signer("q", SECRET_Q).sign(b"k", VALUE), VALUE)
    assert not KEYS.is_privileged(NS, b"k", Signer("p", SECRET_Q).sign(b"k", VALUE), VALUE)
    assert not KEYS.is_privileged(NS, b"k", [], VALUE)
    assert not KEYS.is_privileged(NS, b"k", signed + signed, VALUE)  # two signatures


def test_the_privileged_flag_comes_from_publisher_keys() -> None:
    settings = Settings(_env_file=None, publisher_keys={  # type: ignore[call-arg]
        "p": {"secret": SECRET_P.decode(), "namespaces": [str(NS)], "privileged": True},
        "q": {"secret": SECRET_Q.decode(), "namespaces": [str(NS)]}})
    assert PublisherKeys.from_settings(settings).privileged == frozenset({"p"})
