"""Issue 12, item 1: the memory events on the real pipeline (consumer running), two tenants
everywhere: sessions, idempotent message adds in arrival order, soft delete and revival,
one message's metadata key (`system` only with a privileged publisher key), external summaries,
and each poison event dead-lettered with its code while the next event on the session applies.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaProducer

from pipeline.kafka.io import make_producer
from pipeline.kafka.publisher import EventPublisher
from pipeline.kafka.signing import Signer
from pipeline.settings import Settings
from schemas.limits import MESSAGE_CONTENT_MAX, MESSAGES_PER_EVENT
from tests.memory.memutil import (
    add,
    dead_letters,
    key_of,
    message,
    messages_of,
    send,
    session_put,
    session_row,
)
from tests.pipelineutil import (
    MEMORY_KEYED_NS,
    PUBLISHER_SECRETS,
    Proc,
    Publisher,
    envelope,
    wait_for,
)

pytestmark = pytest.mark.stack


def _count(settings: Settings, ns: uuid.UUID | str, sid: str, n: int) -> list[dict[str, Any]]:
    return wait_for(lambda: (m := messages_of(settings, ns, sid)) and len(m) == n and m,
                    timeout=30, what=f"{n} messages in {sid}")


def test_sessions_and_messages_two_tenants(procs: dict[str, Proc], catalog: Settings,
                                           publisher: Publisher) -> None:
    a, b, sid = uuid.uuid4(), uuid.uuid4(), "chat-1"
    first = [message("hello, I am Ana"), message("hi Ana", role="assistant"),
             message("I live in Lisbon", metadata={"topic": "home"})]
    send(publisher, a, sid,
         session_put(a, sid, user_id="ana", metadata={"plan": "free", "lang": "pt"}),
         add(a, sid, *first))
    send(publisher, b, sid, add(b, sid, message("tenant B's only message")))
    rows = _count(catalog, a, sid, 3)
    assert [(r["seq"], r["uuid"], r["role"]) for r in rows] == [
        (i + 1, m["uuid"], m["role"]) for i, m in enumerate(first)]
    assert rows[2]["metadata"] == {"topic": "home"}
    b_rows = _count(catalog, b, sid, 1)  # implicitly created, apart from A's session of that name
    assert b_rows[0]["content"] == "tenant B's only message"
    assert session_row(catalog, b, sid)["user_id"] is None  # type: ignore[index]

    # re-adding stored uuids changes nothing (idempotent); new ones follow in order; metadata
    # merges key by key, a null removes one
    later = message("what's the weather?")
    send(publisher, a, sid, add(a, sid, first[1], later, first[0]),
         session_put(a, sid, metadata={"plan": "pro", "lang": None}))
    rows = _count(catalog, a, sid, 4)
    assert rows[3]["uuid"] == later["uuid"] and rows[3]["seq"] == 4
    wait_for(lambda: session_row(catalog, a, sid)["metadata"] == {"plan": "pro"},  # type: ignore[index]
             timeout=15, what="the merged session metadata")
    row = session_row(catalog, a, sid)
    assert row is not None and (row["user_id"], row["last_seq"]) == ("ana", 4)
    assert len(messages_of(catalog, b, sid)) == 1  # B untouched


def test_delete_hides_and_put_revives_without_old_messages(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    a, b, sid = uuid.uuid4(), uuid.uuid4(), "to-delete"
    old = [message("one"), message("two")]
    send(publisher, a, sid, add(a, sid, *old))
    send(publisher, b, sid, add(b, sid, message("B keeps this")))
    _count(catalog, a, sid, 2)
    refused = add(a, sid, message("after the delete"))
    send(publisher, a, sid, envelope("session.delete", a, {"session_id": sid}), refused)
    letters = wait_for(lambda: dead_letters(catalog, [refused["id"]]), timeout=30,
                       what="the dead letter of an add to a deleted session")
    assert letters[refused["id"]]["brainstream.error.code"] == "session_deleted"
    assert messages_of(catalog, a, sid) == []
    assert session_row(catalog, a, sid)["deleted_at"] is not None  # type: ignore[index]

    new = message("a fresh start")
    send(publisher, a, sid, session_put(a, sid, user_id="bo"), add(a, sid, new))
    rows = _count(catalog, a, sid, 1)
    assert (rows[0]["uuid"], rows[0]["seq"]) == (new["uuid"], 3)
    row = session_row(catalog, a, sid)
    assert row is not None and row["deleted_at"] is None
    assert (row["last_seq"], row["summary_seq"]) == (3, 2)  # the hidden ones are never folded
    assert len(messages_of(catalog, a, sid, visible=False)) == 3
    assert len(messages_of(catalog, b, sid)) == 1


def test_message_metadata_and_external_summary(procs: dict[str, Proc], catalog: Settings,
                                               publisher: Publisher) -> None:
    a, b, sid = uuid.uuid4(), uuid.uuid4(), "meta"
    msgs = [message("first", metadata={"keep": 1, "drop": 2}), message("second")]
    send(publisher, a, sid, add(a, sid, *msgs))
    send(publisher, b, sid, add(b, sid, message("B", metadata={"keep": "b"})))
    _count(catalog, a, sid, 2)
    summary = str(uuid.uuid4())
    send(publisher, a, sid,
         envelope("message.metadata", a, {"session_id": sid, "uuid": msgs[0]["uuid"],
                                          "key": "mood", "value": {"score": 0.5}}),
         envelope("message.metadata", a, {"session_id": sid, "uuid": msgs[0]["uuid"],
                                          "key": "drop", "delete": True}),
         envelope("summary.put", a, {"session_id": sid, "uuid": summary,
                                     "content": "Ana said first.",
                                     "recent_message_uuid": msgs[0]["uuid"]}))
    wait_for(lambda: session_row(catalog, a, sid)["summary_uuid"] is not None,  # type: ignore[index]
             timeout=30, what="the external summary")
    row = session_row(catalog, a, sid)
    assert row is not None and (str(row["summary_uuid"]), row["summary_seq"]) == (summary, 1)
    assert messages_of(catalog, a, sid)[0]["metadata"] == {"keep": 1, "mood": {"score": 0.5}}
    assert messages_of(catalog, b, sid)[0]["metadata"] == {"keep": "b"}
    assert session_row(catalog, b, sid)["summary_uuid"] is None  # type: ignore[index]


@pytest.fixture()
def signed(stack_settings: Settings) -> Iterator[KafkaProducer]:
    producer = make_producer(stack_settings)
    yield producer
    producer.close()


def test_system_metadata_needs_a_privileged_key(procs: dict[str, Proc], catalog: Settings,
                                                signed: KafkaProducer) -> None:
    ns, sid = MEMORY_KEYED_NS, "privileged"
    topic = catalog.topic_events
    plain = EventPublisher(signed, topic, Signer("tests-mem", PUBLISHER_SECRETS["tests-mem"]
                                                 .encode()))
    priv = EventPublisher(signed, topic, Signer("tests-mem-priv",
                                                PUBLISHER_SECRETS["tests-mem-priv"].encode()))
    msg = message("hello")
    refused = [add(ns, sid, message("x", metadata={"system": {"entities": []}})),
               envelope("message.metadata", ns, {"session_id": sid, "uuid": msg["uuid"],
                                                 "key": "system", "value": {"a": 1}})]
    allowed = envelope("message.metadata", ns, {"session_id": sid, "uuid": msg["uuid"],
                                                "key": "system", "value": {"intent": "greet"}})
    key = key_of(ns, sid).encode()
    for pub, event in [(plain, add(ns, sid, msg)), *((plain, e) for e in refused),
                       (priv, allowed)]:
        pub.send(json.dumps(event).encode(), key)
    plain.flush()
    letters = wait_for(lambda: dead_letters(catalog, [e["id"] for e in refused]), timeout=30,
                       what="the refused system writes")
    assert {h["brainstream.error.code"] for h in letters.values()} == {"privileged_key_required"}
    rows = wait_for(lambda: (m := messages_of(catalog, ns, sid)) and m[0]["system"] and m,
                    timeout=30, what="the privileged system write")
    assert len(rows) == 1
    assert rows[0]["system"]["intent"] == "greet"


def _poisons(ns: uuid.UUID, sid: str, stored: dict[str, Any]) -> list[tuple[Any, str, str]]:
    """(event, code, field) of each poison memory event."""
    other_sid = "someone-else"
    return [
        (add(ns, sid, message("c" * (MESSAGE_CONTENT_MAX + 1))), "invalid_payload",
         "data.messages[0].content"),
        (add(ns, sid, {**message("x"), "uuid": "not-a-uuid"}), "invalid_payload",
         "data.messages[0].uuid"),
        (add(ns, sid, message("x"), {**message("y"), "uuid": stored["uuid"]},
             {**message("z"), "uuid": stored["uuid"]}), "invalid_payload", "data.messages"),
        (add(ns, sid, message("x", role="no spaces please")), "invalid_payload",
         "data.messages[0].role"),
        (add(ns, sid, *[message("m") for _ in range(MESSAGES_PER_EVENT + 1)]),
         "invalid_payload", "data.messages"),
        (envelope("messages.add", ns, {"messages": [message("x")]}), "invalid_payload",
         "data.session_id"),
        (add(ns, other_sid, {**message("steal"), "uuid": stored["uuid"]}),
         "uuid_in_other_session", "data.messages[0].uuid"),
        (envelope("message.metadata", ns, {"session_id": sid, "uuid": str(uuid.uuid4()),
                                           "key": "k", "value": 1}),
         "message_not_found", "data.uuid"),
        (envelope("message.metadata", ns, {"session_id": sid, "uuid": stored["uuid"],
                                           "key": "k"}), "invalid_payload", "data"),
        (envelope("summary.put", ns, {"session_id": sid, "uuid": str(uuid.uuid4()),
                                      "content": "s", "recent_message_uuid": str(uuid.uuid4())}),
         "message_not_found", "data.recent_message_uuid"),
        (envelope("session.delete", ns, {"session_id": "never-was"}), "session_not_found",
         "data.session_id"),
    ]


def test_poison_memory_events_are_dead_lettered_and_the_next_applies(
        procs: dict[str, Proc], catalog: Settings, publisher: Publisher) -> None:
    ns, sid = uuid.uuid4(), "poisoned"
    stored = message("the first")
    send(publisher, ns, sid, add(ns, sid, stored))
    _count(catalog, ns, sid, 1)
    poisons = _poisons(ns, sid, stored)
    goods = []
    for event, _, _ in poisons:
        good = message("after a poison")
        goods.append(good)
        send(publisher, ns, sid, event, add(ns, sid, good))
    rows = _count(catalog, ns, sid, 1 + len(poisons))
    assert [r["uuid"] for r in rows] == [stored["uuid"], *(g["uuid"] for g in goods)]
    letters = wait_for(lambda: dead_letters(catalog, [e["id"] for e, _, _ in poisons]),
                       timeout=30, what="every poison's dead letter")
    got = [(letters[e["id"]]["brainstream.error.code"],
            letters[e["id"]].get("brainstream.error.field")) for e, _, _ in poisons]
    assert got == [(code, field) for _, code, field in poisons]
    assert messages_of(catalog, ns, "someone-else") == []
