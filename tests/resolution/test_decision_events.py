"""`brainstream.entity.decision` through the session's running pipeline (consumer, worker, relay):
a poison decision is dead-lettered with its code and the next event on the same partition is
recorded; a redelivered decision is recorded once; a decision waits while its entities do not
exist and is applied once they do; a decision of tenant B naming tenant A's entities changes
nothing of A's.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from pipeline.entities.decisions import apply_pending
from pipeline.settings import Settings
from tests.pipelineutil import Proc, Publisher, envelope, read_topic, wait_for

pytestmark = pytest.mark.stack


def decision(ns: uuid.UUID, data: dict[str, Any], event_id: str | None = None
             ) -> dict[str, Any]:
    event = envelope("entity.decision", ns, data)
    event["id"] = event_id or event["id"]
    return event


def rows(settings: Settings, statement: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        return conn.execute(statement, args).fetchall()


def letter_code(settings: Settings, tag: str) -> str | None:
    for _, value, headers in read_topic(settings, settings.topic_dlq, timeout_ms=1500):
        if tag.encode() in value:
            return headers.get("brainstream.error.code")
    return None


def test_poison_decisions_are_dead_lettered_and_the_next_event_is_recorded(
        catalog: Settings, procs: dict[str, Proc], publisher: Publisher) -> None:
    settings = catalog
    a, b = uuid.uuid4(), uuid.uuid4()
    x, y = uuid.uuid4(), uuid.uuid4()
    key = str(x)  # one partition for all
    poisons = {
        "same": {"decision": "merge", "from": str(x), "to": str(x), "decided_by": "p-same"},
        "verb": {"decision": "split", "from": str(x), "to": str(y), "decided_by": "p-verb"},
        "who": {"decision": "merge", "from": str(x), "to": str(y), "decided_by": " ",
                "note": "p-who"},
        "extra": {"decision": "refuse", "from": str(x), "to": str(y), "decided_by": "p-extra",
                  "why": "unknown field"},
    }
    for data in poisons.values():
        publisher.send(decision(a, data), key)
    good = decision(a, {"decision": "merge", "from": str(x), "to": str(y),
                        "decided_by": "Ada", "note": "the same firm"})
    publisher.send(good, key)
    publisher.send(good, key)  # redelivered: recorded once
    # B names A's entity ids: recorded in B, where they do not exist
    publisher.send(decision(b, {"decision": "merge", "from": str(y), "to": str(x),
                                "decided_by": "Bo"}), key)

    def recorded() -> list[tuple[Any, ...]]:
        found = rows(settings, "SELECT namespace_id, event_id, decision, status FROM"
                     " entity_decisions WHERE from_id = ANY(%s) ORDER BY seq", [x, y])
        return found if len(found) == 2 else []

    got = wait_for(recorded, timeout=60, what="the good decisions behind the poison")
    assert [(ns, d, s) for ns, _, d, s in got] == [(a, "merge", "pending"),
                                                  (b, "merge", "pending")]
    assert got[0][1] == good["id"]
    for name, data in poisons.items():
        tag = str(data.get("note") or data["decided_by"])
        code = wait_for(lambda tag=tag: letter_code(settings, tag), timeout=20,  # type: ignore[misc]
                        what=f"the dead letter of {name}")
        assert code == "invalid_payload", name

    # the entities appear (as extraction would make them): A's decision applies, B's waits
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label)"
                     " VALUES (%s, %s, 'Acme Ltd', 'acme ltd', 'NAME'),"
                     " (%s, %s, 'Acme Holdings', 'acme holdings', 'NAME')",
                     (x, a, y, a))
        # examined already (as a loader of examined entities does): no proposal pass between them
        conn.execute("DELETE FROM entity_proposal_queue WHERE entity_id IN (%s, %s)", (x, y))

    def applied() -> bool:
        # what the worker's extraction round (or the sweep) runs; it may have run already
        with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
            apply_pending(conn, batch=100)
        return rows(settings, "SELECT status FROM entity_decisions WHERE namespace_id = %s"
                    " AND event_id = %s", a, good["id"]) == [("applied",)]

    wait_for(applied, timeout=30, what="A's decision to apply")
    assert rows(settings, "SELECT merged_into FROM entities WHERE id = %s", x) == [(y,)]
    assert rows(settings, "SELECT decided_by, note, method FROM entity_merges"
                " WHERE from_id = %s", x) == [("Ada", "the same firm", "person")]
    assert rows(settings, "SELECT status FROM entity_decisions WHERE namespace_id = %s", b
                ) == [("pending",)]
    assert rows(settings, "SELECT count(*) FROM entity_merges WHERE namespace_id = %s", b
                ) == [(0,)]
