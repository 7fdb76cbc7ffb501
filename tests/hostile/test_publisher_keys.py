"""Issue 10, item 10: publisher keys bind publishers to namespaces.

On the session's pipeline, whose consumer has `tests.pipelineutil.PUBLISHER_KEYS`: tenant A's
namespace (`KEYED_NS`) is bound to key "tests-a"; "tests-b" is tenant B's key for its own
protected namespace; B also writes to an open namespace. Every hostile record goes to the same
partition as the events that must still be applied after it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pipeline.kafka.io import H_EVENT_ID, make_producer
from pipeline.kafka.publisher import EventPublisher
from pipeline.kafka.signing import Signer
from pipeline.ops import dlq
from pipeline.settings import Settings
from tests.pipelineutil import (
    KEYED_NS,
    PUBLISHER_SECRETS,
    Proc,
    envelope,
    indexed,
    pipeline_env,
    put,
    wait_for,
)

pytestmark = pytest.mark.stack

UNAUTHORIZED = "unauthorized_namespace"


def _signer(key_id: str) -> Signer:
    return Signer(key_id, PUBLISHER_SECRETS[key_id].encode())


@pytest.fixture()
def publishers(stack_settings: Settings) -> Iterator[dict[str, EventPublisher]]:
    """Unsigned, signed with A's key, signed with B's key: one producer, acknowledged sends."""
    producer = make_producer(stack_settings)
    topic = stack_settings.topic_events
    yield {"unsigned": EventPublisher(producer, topic),
           "a": EventPublisher(producer, topic, _signer("tests-a")),
           "b": EventPublisher(producer, topic, _signer("tests-b"))}
    producer.close()


def _send(publisher: EventPublisher, event: dict[str, Any], key: bytes) -> None:
    publisher.send(json.dumps(event).encode(), key)
    publisher.flush()


def _letters(settings: Settings, event_ids: list[str]) -> dict[str, str] | None:
    """event id -> the code of its (latest) dead letter, once every one has a letter."""
    found = {letter.header(H_EVENT_ID) or "": letter.code for letter in dlq.read_all(settings)
             if letter.header(H_EVENT_ID) in event_ids}
    return found if len(found) == len(event_ids) else None


def _row(settings: Settings, object_id: str) -> tuple[Any, ...] | None:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        return conn.execute("SELECT namespace_id::text, title, deleted_at IS NOT NULL"
                            " FROM objects WHERE id = %s", (object_id,)).fetchone()


def _claimed(settings: Settings, event_ids: list[str]) -> int:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute("SELECT count(*) FROM processed_events WHERE event_id = ANY(%s)",
                           (event_ids,)).fetchone()
    return int(row[0]) if row else -1


def test_only_events_signed_with_a_key_of_the_namespace_write_into_it(
        procs: dict[str, Proc], catalog: Settings,
        publishers: dict[str, EventPublisher]) -> None:
    partition_key = f"keys-{uuid.uuid4()}".encode()  # every record below: one partition
    original = put(KEYED_NS, title="Tenant A original")
    oid = original["data"]["id"]
    _send(publishers["a"], original, partition_key)
    wait_for(lambda: indexed(catalog, oid), what="A's signed put")

    unsigned = put(KEYED_NS, id=oid, title="Hijacked, unsigned")
    foreign = put(KEYED_NS, id=oid, title="Hijacked with B's key")
    tampered = put(KEYED_NS, id=oid, title="Signed by A")
    signed_value = json.dumps(tampered).encode()
    headers = _signer("tests-a").sign(partition_key, signed_value)
    tampered["data"]["title"] = "Hijacked after signing"
    _send(publishers["unsigned"], unsigned, partition_key)
    _send(publishers["b"], foreign, partition_key)
    publishers["a"].producer.send(catalog.topic_events, key=partition_key, headers=headers,
                                  value=json.dumps(tampered).encode()).get(timeout=30)
    after = put(KEYED_NS, title="Tenant A, after the rejected ones")
    open_ns = str(uuid.uuid4())
    tenant_b = put(open_ns, title="Tenant B, unsigned, open namespace")
    _send(publishers["a"], after, partition_key)
    _send(publishers["unsigned"], tenant_b, partition_key)

    wait_for(lambda: indexed(catalog, after["data"]["id"]),
             what="A's next signed put on the same partition")
    wait_for(lambda: indexed(catalog, tenant_b["data"]["id"]), what="B's unsigned put")
    hostile = [unsigned["id"], foreign["id"], tampered["id"]]
    letters = wait_for(lambda: _letters(catalog, hostile), what="the three dead letters")
    assert letters == dict.fromkeys(hostile, UNAUTHORIZED)
    assert _row(catalog, oid) == (KEYED_NS, "Tenant A original", False)
    assert _claimed(catalog, hostile) == 0  # refused before the ledger: no id was taken
    assert _row(catalog, tenant_b["data"]["id"]) == (open_ns, tenant_b["data"]["title"], False)


def test_brainstream_publish_signs_with_a_key_id(procs: dict[str, Proc], catalog: Settings,
                                                 tmp_path: Path) -> None:
    lines = tmp_path / "objects.jsonl"
    signed_id, unsigned_id = str(uuid.uuid4()), str(uuid.uuid4())
    lines.write_text(json.dumps({"id": signed_id, "kind": "company", "title": "Via the CLI"}))
    env = pipeline_env(catalog)
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "publish", str(lines),
                           "--namespace", KEYED_NS, "--key-id", "tests-a"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and "signed with key tests-a" in done.stdout, done.stderr
    lines.write_text(json.dumps({"id": unsigned_id, "kind": "company", "title": "No key"}))
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "publish", str(lines),
                           "--namespace", KEYED_NS], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    wait_for(lambda: indexed(catalog, signed_id), what="the put published with --key-id")
    letter = wait_for(lambda: next((d for d in dlq.read_all(catalog)
                                    if unsigned_id.encode() in d.value), None),
                      what="the unsigned put's dead letter")
    assert letter.code == UNAUTHORIZED and _row(catalog, unsigned_id) is None


def test_a_re_driven_signed_event_still_verifies(procs: dict[str, Proc], catalog: Settings,
                                                 publishers: dict[str, EventPublisher]) -> None:
    oid = str(uuid.uuid4())
    delete = envelope("object.soft_delete", KEYED_NS, {"id": oid})
    _send(publishers["a"], delete, oid.encode())  # before its object exists: dead-lettered
    letter = wait_for(lambda: next((d for d in dlq.read_all(catalog)
                                    if d.header(H_EVENT_ID) == delete["id"]), None),
                      what="the early delete's dead letter")
    assert letter.code == "object_not_found"
    _send(publishers["a"], put(KEYED_NS, id=oid, title="Deleted once re-driven"), oid.encode())
    wait_for(lambda: indexed(catalog, oid), what="the object")
    assert dlq.retry(catalog, [letter])["republished"] == 1
    wait_for(lambda: _row(catalog, oid) == (KEYED_NS, "Deleted once re-driven", True),
             what="the re-driven delete to apply")
    assert _letters(catalog, [delete["id"]]) == {delete["id"]: "object_not_found"}
