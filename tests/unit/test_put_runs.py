"""Which events a run of puts takes (pipeline/ingest/bulk.py: PutRun): a run never holds two
events about one object nor one ledger key twice, so applying it together keeps each key's
order; anything but a put of a first-class object ends it."""

from __future__ import annotations

import json
import uuid
from typing import Any

from pipeline.ingest.bulk import Consumed, PutRun
from pipeline.ingest.records import RawRecord
from schemas.events import parse_event
from tests.pipelineutil import envelope, put


def _item(event: dict[str, Any]) -> Consumed:
    value = json.dumps(event).encode()
    return Consumed(RawRecord("t", 0, 0, None, value), parse_event(value), None, False)


def test_a_run_takes_puts_of_distinct_objects_under_distinct_event_ids() -> None:
    ns = uuid.uuid4()
    run = PutRun()
    first, second = put(ns, title="a"), put(ns, title="b")
    for event in (first, second):
        assert run.admits(_item(event).event)
        run.add(_item(event))
    again = put(ns, id=first["data"]["id"], title="a again")  # the same object
    reused = put(ns, title="c") | {"id": second["id"]}  # the same ledger key
    other_ns = put(uuid.uuid4(), title="d") | {"id": second["id"]}  # another namespace's key
    assert not run.admits(_item(again).event)
    assert not run.admits(_item(reused).event)
    assert run.admits(_item(other_ns).event)
    assert [i.event.event_id for i in run.take()] == [first["id"], second["id"]]
    assert run.admits(_item(again).event) and run.admits(_item(reused).event)  # empty again


def test_only_puts_of_first_class_objects_join_a_run() -> None:
    ns = uuid.uuid4()
    parent = str(uuid.uuid4())
    run = PutRun()
    part = envelope("object.put", ns, {"kind": "c", "parent_id": parent, "position": 0,
                                       "content": "a part"})
    delete = envelope("object.soft_delete", ns, {"id": parent})
    link = envelope("link.put", ns, {"from": parent, "to": str(uuid.uuid4()),
                                     "relation_type": "knows"})
    for event in (part, delete, link):
        assert not run.admits(_item(event).event)
