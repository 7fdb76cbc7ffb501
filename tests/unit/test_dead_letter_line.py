"""The consumer logs each dead letter with its reason (`DeadLetter.describe`): the batch line
alone said how many, and a set-up that lost two valid events could not say which or why."""

from __future__ import annotations

from pipeline.domain.errors import InvalidInput
from pipeline.ingest.records import DeadLetter, RawRecord


def test_the_line_names_the_record_the_event_and_the_reason() -> None:
    record = RawRecord(topic="brainstream.events", partition=3, offset=41, key=b"k", value=b"{}")
    letter = DeadLetter(record, InvalidInput("no such kind: 'dael'", field="kind"), "ev-1")
    assert letter.describe() == ("brainstream.events[3]@41 event ev-1: invalid_input"
                                 " (field kind): no such kind: 'dael'")


def test_a_long_message_is_cut_and_a_missing_event_id_shown() -> None:
    record = RawRecord(topic="t", partition=0, offset=0, key=None, value=b"")
    line = DeadLetter(record, InvalidInput("x" * 1000)).describe()
    assert line.startswith("t[0]@0 event -: invalid_input: x")
    assert len(line) < 400
