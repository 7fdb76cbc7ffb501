"""Link and object history on the write path (apply_batch on a real Postgres): link versions by
valid and system time, functional relation types cut each other whatever the order events
arrive in, a delete ends and a retraction withdraws, the current-state row follows, and every
change of an object is a version."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from pipeline.domain.relations import RelationSpec
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import IngestOptions, RawRecord
from pipeline.ingest.store.catalog import apply_relations
from pipeline.ingest.store.events import PgEventStore
from tests.pipelineutil import envelope, put

pytestmark = pytest.mark.stack

OPTIONS = IngestOptions(chunk_max_tokens=20, chunk_overlap_tokens=0)
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def year(y: int) -> str:
    return f"{y}-01-01T00:00:00Z"


class Log:
    """Events applied one batch at a time, each record stamped a minute after the last."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.clock = NOW

    def apply(self, *events: dict[str, Any]) -> Any:
        records = []
        for i, e in enumerate(events):
            self.clock += timedelta(minutes=1)
            records.append(RawRecord("t", 0, i, None, json.dumps(e).encode(),
                                     timestamp_ms=int(self.clock.timestamp() * 1000)))
        with self.conn.transaction():
            outcome = apply_batch(PgEventStore(self.conn), records, OPTIONS)
        assert not outcome.dead, [d.describe() for d in outcome.dead]
        return outcome


def link(ns: uuid.UUID, a: str, rel: str, b: str, **data: Any) -> dict[str, Any]:
    return envelope("link.put", ns, {"from": a, "to": b, "relation_type": rel, **data})


def unlink(ns: uuid.UUID, a: str, rel: str, b: str, **data: Any) -> dict[str, Any]:
    return envelope("link.delete", ns, {"from": a, "to": b, "relation_type": rel, **data})


def objects(log: Log, ns: uuid.UUID, n: int) -> list[str]:
    events = [put(ns, kind="company", title=f"o{i}") for i in range(n)]
    log.apply(*events)
    return [e["data"]["id"] for e in events]


def believed(conn: psycopg.Connection[Any], a: str, rel: str) -> list[tuple[Any, ...]]:
    """(to, valid_from year, valid_to year) of the believed holding versions."""
    rows = conn.execute(
        "SELECT to_id::text, valid_from, valid_to FROM link_versions WHERE from_id = %s"
        " AND relation_type = %s AND invalidated_at IS NULL AND state = 'holds'"
        " ORDER BY valid_from NULLS FIRST", (a, rel)).fetchall()
    return [(to, f and f.year, t and t.year) for to, f, t in rows]


def live(conn: psycopg.Connection[Any], a: str, rel: str) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT to_id::text FROM links WHERE from_id = %s AND relation_type = %s"
        " AND deleted_at IS NULL ORDER BY to_id", (a, rel)).fetchall()]


@pytest.fixture()
def log(db: psycopg.Connection[Any]) -> Log:
    apply_relations(db, [RelationSpec("led_by", "who runs it", functional=True)])
    return Log(db)


def test_out_of_order_functional_puts_give_the_in_order_timeline(log: Log) -> None:
    ns = uuid.uuid4()
    company, x, y, z = objects(log, ns, 4)
    # published out of order: 2022, then 2010, then 2016 (each a separate batch)
    log.apply(link(ns, company, "led_by", z, valid_from=year(2022)))
    log.apply(link(ns, company, "led_by", x, valid_from=year(2010)))
    outcome = log.apply(link(ns, company, "led_by", y, valid_from=year(2016)))
    assert believed(log.conn, company, "led_by") == [(x, 2010, 2016), (y, 2016, 2022),
                                                     (z, 2022, None)]
    assert live(log.conn, company, "led_by") == [z]  # holding now, as believed now
    assert outcome.outbox_rows >= 1
    # x's first version (to always-after 2010) was believed until y arrived, then invalidated
    rows = log.conn.execute(
        "SELECT seq, valid_to, change, invalidated_by IS NOT NULL FROM link_versions"
        " WHERE from_id = %s AND to_id = %s ORDER BY seq", (company, x)).fetchall()
    assert [(s, t and t.year, c, inv) for s, t, c, inv in rows] == \
        [(1, 2022, "put", True), (2, 2016, "cut", False)]


def test_a_new_target_cuts_the_holding_one_and_its_row_goes(log: Log) -> None:
    ns = uuid.uuid4()
    company, x, y = objects(log, ns, 3)
    log.apply(link(ns, company, "led_by", x, valid_from=year(2010)))
    assert live(log.conn, company, "led_by") == [x]
    outcome = log.apply(link(ns, company, "led_by", y, valid_from=year(2020)))
    assert live(log.conn, company, "led_by") == [y]
    assert outcome.outbox_rows == 2  # the new edge and the cut one are both synced
    # a plain relation type never cuts: both hold
    log.apply(link(ns, company, "partner", x), link(ns, company, "partner", y))
    assert sorted(live(log.conn, company, "partner")) == sorted([x, y])


def test_delete_ends_and_retract_withdraws(log: Log) -> None:
    ns = uuid.uuid4()
    company, x, y = objects(log, ns, 3)
    log.apply(link(ns, company, "led_by", x, valid_from=year(2010)),
              link(ns, company, "led_by", y, valid_from=year(2020)))
    # y was never CEO: retracted, x's version runs on and x holds again now
    log.apply(unlink(ns, company, "led_by", y, retract=True))
    assert believed(log.conn, company, "led_by") == [(x, 2010, None)]
    assert live(log.conn, company, "led_by") == [x]
    # x stopped in 2024: ended, kept in the history
    log.apply(unlink(ns, company, "led_by", x, valid_to=year(2024)))
    assert believed(log.conn, company, "led_by") == [(x, 2010, 2024)]
    assert live(log.conn, company, "led_by") == []
    assert log.conn.execute(
        "SELECT count(*) FROM link_versions WHERE from_id = %s AND to_id = %s"
        " AND state = 'ended' AND invalidated_at IS NULL", (company, x)).fetchone() == (1,)
    # a delete without valid_to ends the link at the event's record time
    log.apply(link(ns, company, "partner", y))
    log.apply(unlink(ns, company, "partner", y))
    (valid_to,), = log.conn.execute(
        "SELECT valid_to FROM link_versions WHERE from_id = %s AND relation_type = 'partner'"
        " AND state = 'holds' AND invalidated_at IS NULL", (company,)).fetchall()
    assert valid_to == log.clock


def test_a_dated_delete_before_its_put_ends_it_when_the_put_comes(log: Log) -> None:
    """Histories are published out of order: a dated end may arrive before the put it ends."""
    ns, other = uuid.uuid4(), uuid.uuid4()
    person, acme, globex = objects(log, ns, 3)
    (foreign,) = objects(log, other, 1)
    log.apply(unlink(ns, person, "works_at", acme, valid_to=year(2020)))
    assert believed(log.conn, person, "works_at") == []
    assert live(log.conn, person, "works_at") == []
    log.apply(link(ns, person, "works_at", acme, valid_from=year(2015)))
    assert believed(log.conn, person, "works_at") == [(acme, 2015, 2020)]
    assert live(log.conn, person, "works_at") == []  # it ended before now
    # an undated delete of a link never put names no time: still refused
    with log.conn.transaction():
        outcome = apply_batch(PgEventStore(log.conn), [RawRecord(
            "t", 0, 0, None, json.dumps(unlink(ns, person, "works_at", globex)).encode(),
            timestamp_ms=int(log.clock.timestamp() * 1000))], OPTIONS)
    assert [d.error.code for d in outcome.dead] == ["link_not_found"]
    # another namespace's object is no endpoint, dated or not
    with log.conn.transaction():
        outcome = apply_batch(PgEventStore(log.conn), [RawRecord(
            "t", 0, 0, None, json.dumps(unlink(ns, person, "works_at", foreign,
                                               valid_to=year(2020))).encode(),
            timestamp_ms=int(log.clock.timestamp() * 1000))], OPTIONS)
    assert [d.error.code for d in outcome.dead] == ["link_endpoint_not_found"]


def test_versions_are_stamped_with_record_time_and_event(log: Log) -> None:
    ns = uuid.uuid4()
    company, x = objects(log, ns, 2)
    event = link(ns, company, "partner", x, valid_from=year(2015), valid_to=year(2030))
    log.apply(event)
    (recorded_at, recorded_by, asserted_to), = log.conn.execute(
        "SELECT recorded_at, recorded_by, asserted_to FROM link_versions WHERE from_id = %s",
        (company,)).fetchall()
    assert recorded_at == log.clock and recorded_by == f"tests#{event['id']}"
    assert asserted_to.year == 2030


def test_every_change_of_an_object_is_a_version(log: Log) -> None:
    ns = uuid.uuid4()
    first = put(ns, kind="company", title="v1")
    oid = first["data"]["id"]
    log.apply(first)
    log.apply(put(ns, id=oid, kind="company", title="v2"))
    log.apply(envelope("object.soft_delete", ns, {"id": oid}))
    log.apply(put(ns, id=oid, kind="company", title="v3"))
    rows = log.conn.execute("SELECT seq, change, title, recorded_at FROM object_versions"
                            " WHERE object_id = %s ORDER BY seq", (oid,)).fetchall()
    assert [(s, c, t) for s, c, t, _ in rows] == [(1, "put", "v1"), (2, "put", "v2"),
                                                  (3, "delete", "v2"), (4, "revive", "v3")]
    assert rows[-1][3] == log.clock
    # a delete by filter is a version too
    log.apply(envelope("objects.soft_delete", ns, {"source": "tests"}))
    assert log.conn.execute("SELECT change FROM object_versions WHERE object_id = %s"
                            " ORDER BY seq DESC LIMIT 1", (oid,)).fetchone() == ("delete",)


def test_an_undated_put_after_a_delete_holds_again(log: Log) -> None:
    ns = uuid.uuid4()
    company, x, y = objects(log, ns, 3)
    log.apply(link(ns, company, "partner", x))
    log.apply(unlink(ns, company, "partner", x))
    assert live(log.conn, company, "partner") == []
    log.apply(link(ns, company, "partner", x))
    assert live(log.conn, company, "partner") == [x]
    # a re-put of the same, still holding: no new version
    count = log.conn.execute("SELECT count(*) FROM link_versions WHERE from_id = %s",
                             (company,)).fetchone()
    log.apply(link(ns, company, "partner", x))
    assert log.conn.execute("SELECT count(*) FROM link_versions WHERE from_id = %s",
                            (company,)).fetchone() == count
    # an undated put of a functional type's new target takes over from its time
    log.apply(link(ns, company, "led_by", x))
    log.apply(link(ns, company, "led_by", y))
    assert live(log.conn, company, "led_by") == [y]
    assert believed(log.conn, company, "led_by") == [(x, None, log.clock.year),
                                                     (y, log.clock.year, None)]


def test_a_deferred_link_keeps_its_record_time(log: Log) -> None:
    ns = uuid.uuid4()
    (company,) = objects(log, ns, 1)
    late = put(ns, kind="company", title="arrives late")
    outcome = log.apply(link(ns, company, "partner", late["data"]["id"]))
    assert outcome.deferred == 1
    published = log.clock
    # (its retry in the same batch postponed it: make it due now)
    log.conn.execute("UPDATE deferred_events SET next_attempt_at = now() - interval '1 second'")
    log.apply(late)  # the endpoint arrives; the batch retries the deferred link after it
    (recorded_at,), = log.conn.execute(
        "SELECT recorded_at FROM link_versions WHERE from_id = %s", (company,)).fetchall()
    assert recorded_at == published < log.clock
    assert live(log.conn, company, "partner") == [late["data"]["id"]]
