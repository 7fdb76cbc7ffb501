"""The recall rules' pure parts: who said a message, which speakers a query names (and the
query without them), and the time range a query's words ask about."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, strategies as st

from pipeline.memory.speakers import named_speakers, speaker_of, without_speakers
from pipeline.memory.when import time_range

NOW = datetime(2026, 12, 5, 15, 0, tzinfo=UTC)  # a Saturday
LAST_SAID = datetime(2023, 10, 20, tzinfo=UTC)


def _day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


def test_a_messages_speaker_is_its_metadata_name_else_its_role() -> None:
    assert speaker_of("user", {"speaker": "Caroline"}) == "caroline"
    assert speaker_of("user", {"name": "Jon Smith"}) == "jon smith"
    assert speaker_of("Assistant", {"speaker": 3}) == "assistant"
    assert speaker_of(None, {}) is None


def test_a_query_names_speakers_by_whole_name_first_name_or_possessive() -> None:
    speakers = {"caroline", "melanie", "jon smith", "al b"}
    assert named_speakers("What is Caroline's identity?", speakers) == ("caroline",)
    assert named_speakers("did jon go?", speakers) == ("jon smith",)
    assert named_speakers("Carolines and Melanieish", speakers) == ()
    assert named_speakers("all of it", speakers) == ()  # "al": too short a first name
    assert named_speakers("Caroline and Melanie", speakers) == ("caroline", "melanie")
    assert without_speakers("What is Caroline's identity?", ["caroline"]) == "What is identity?"
    assert without_speakers("Caroline?", ["caroline"]) == "Caroline?"  # nothing else left
    assert named_speakers("the user table", {"user"}) == ("user",)
    assert without_speakers("the user table", ["user"]) == "the user table"  # a role: a word


@given(st.text(max_size=40), st.sampled_from(["caroline", "jon smith", "bo"]))
def test_without_speakers_leaves_no_name_it_matched(text: str, speaker: str) -> None:
    out = without_speakers(text, [speaker])
    assert out == text or not named_speakers(out, [speaker])


def test_absolute_expressions() -> None:
    def r(q: str) -> tuple[datetime, datetime] | None:
        found = time_range(q, now=NOW, anchor=LAST_SAID)
        return (found.since, found.until) if found else None
    assert r("what did we say on 8 May 2023") == (_day(2023, 5, 8), _day(2023, 5, 9))
    assert r("the May 8th, 2023 meeting") == (_day(2023, 5, 8), _day(2023, 5, 9))
    assert r("in March of 2022") == (_day(2022, 3, 1), _day(2022, 4, 1))
    assert r("trips in 2022") == (_day(2022, 1, 1), _day(2023, 1, 1))
    assert r("December 2023") == (_day(2023, 12, 1), _day(2024, 1, 1))
    # a month alone: the latest before the last message (the memory's own June)
    assert r("camping in June?") == (_day(2023, 6, 1), _day(2023, 7, 1))
    assert r("last November") == (_day(2022, 11, 1), _day(2022, 12, 1))
    assert r("this summer") == (_day(2023, 6, 1), _day(2023, 9, 1))
    assert r("may I ask about the march") is None  # lower-case May and March are words
    assert r("two weeks before the trip") is None  # anchored on an event: unresolved


def test_relative_expressions_count_from_now() -> None:
    def r(q: str) -> tuple[datetime, datetime] | None:
        found = time_range(q, now=NOW, anchor=LAST_SAID)
        return (found.since, found.until) if found else None
    assert r("what did I cook yesterday") == (_day(2026, 12, 4), _day(2026, 12, 5))
    assert r("today") == (_day(2026, 12, 5), _day(2026, 12, 6))
    assert r("3 days ago") == (_day(2026, 12, 2), _day(2026, 12, 3))
    assert r("a couple of weeks ago") == (_day(2026, 11, 16), _day(2026, 11, 23))
    assert r("last week") == (_day(2026, 11, 23), _day(2026, 11, 30))
    assert r("two months ago") == (_day(2026, 10, 1), _day(2026, 11, 1))
    assert r("last month") == (_day(2026, 11, 1), _day(2026, 12, 1))
    assert r("this year") == (_day(2026, 1, 1), _day(2027, 1, 1))
    assert r("twelve months ago") == (_day(2025, 12, 1), _day(2026, 1, 1))


@given(st.text(max_size=60), st.datetimes(min_value=datetime(1990, 1, 1),
                                          max_value=datetime(2090, 1, 1), timezones=st.just(UTC)))
def test_every_range_is_ordered(text: str, now: datetime) -> None:
    found = time_range(text, now=now, anchor=LAST_SAID)
    assert found is None or found.since < found.until
