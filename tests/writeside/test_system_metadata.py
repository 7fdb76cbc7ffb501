"""A privileged `brainstream.message.metadata` on the `system` key keeps what the extractors
wrote there (`system.entities`, with spans) unless the event names it; a `system` value that is
not an object is dead-lettered and the next event of the session applies (real pipeline)."""

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
from tests.memory.memutil import add, dead_letters, key_of, message, messages_of
from tests.pipelineutil import MEMORY_KEYED_NS, PUBLISHER_SECRETS, Proc, envelope, wait_for

pytestmark = pytest.mark.stack


@pytest.fixture()
def signed(stack_settings: Settings) -> Iterator[KafkaProducer]:
    producer = make_producer(stack_settings)
    yield producer
    producer.close()


def _publisher(producer: KafkaProducer, settings: Settings, key_id: str) -> EventPublisher:
    return EventPublisher(producer, settings.topic_events,
                          Signer(key_id, PUBLISHER_SECRETS[key_id].encode()))


def _system(settings: Settings, sid: str, uuid_: str) -> dict[str, Any]:
    rows = {m["uuid"]: m for m in messages_of(settings, MEMORY_KEYED_NS, sid)}
    return (rows[uuid_]["system"] or {}) if uuid_ in rows else {}


def _set_system(sid: str, uuid_: str, value: Any = None, *, delete: bool = False
                ) -> dict[str, Any]:
    data: dict[str, Any] = {"session_id": sid, "uuid": uuid_, "key": "system"}
    data.update({"delete": True} if delete else {"value": value})
    return envelope("message.metadata", MEMORY_KEYED_NS, data)


def test_privileged_system_overwrite_keeps_extracted_entities(
        procs: dict[str, Proc], catalog: Settings, signed: KafkaProducer) -> None:
    ns, sid = MEMORY_KEYED_NS, f"system-keep-{uuid.uuid4().hex[:8]}"
    plain = _publisher(signed, catalog, "tests-mem")
    priv = _publisher(signed, catalog, "tests-mem-priv")
    key = key_of(ns, sid).encode()
    kept, named = (message("Alice Johnson flew to Berlin for Acme Corporation"),
                   message("Bob Smith met the board of Globex Industries"))
    plain.send(json.dumps(add(ns, sid, kept, named)).encode(), key)
    plain.flush()
    extracted = {m["uuid"]: wait_for(lambda u=m["uuid"]: _system(catalog, sid, u).get("entities"),
                                     timeout=60, what="the entities extractor")
                 for m in (kept, named)}
    assert "Alice Johnson" in {e["name"] for e in extracted[kept["uuid"]]}

    # overwrite without naming `entities`: the extractor's entities stay beside the new keys
    priv.send(json.dumps(_set_system(sid, kept["uuid"], {"intent": "travel"})).encode(), key)
    # the event names `entities`: its value wins
    priv.send(json.dumps(_set_system(sid, named["uuid"], {"entities": [], "by": "ops"}))
              .encode(), key)
    priv.flush()
    wait_for(lambda: _system(catalog, sid, named["uuid"]).get("by"), timeout=30,
             what="the privileged overwrites")
    assert _system(catalog, sid, kept["uuid"]) == {"intent": "travel",
                                                   "entities": extracted[kept["uuid"]]}
    assert _system(catalog, sid, named["uuid"]) == {"entities": [], "by": "ops"}

    # removing `system` removes the publisher's keys, not the extractor's; a `system` value that
    # is not an object is dead-lettered, and the next event of the session still applies
    poison = _set_system(sid, kept["uuid"], ["not", "an", "object"])
    after = envelope("message.metadata", ns, {"session_id": sid, "uuid": kept["uuid"],
                                              "key": "after", "value": 1})
    for event in (_set_system(sid, kept["uuid"], delete=True), poison, after):
        priv.send(json.dumps(event).encode(), key)
    priv.flush()
    letters = wait_for(lambda: dead_letters(catalog, [poison["id"]]), timeout=30,
                       what="the non-object system value's dead letter")
    headers = letters[poison["id"]]
    assert (headers["brainstream.error.code"], headers["brainstream.error.field"]) == (
        "invalid_payload", "data.value")
    row = wait_for(lambda: next((m for m in messages_of(catalog, ns, sid)
                                 if m["uuid"] == kept["uuid"] and m["metadata"].get("after")),
                                None), timeout=30, what="the event after the poison")
    assert row["system"] == {"entities": extracted[kept["uuid"]]}
