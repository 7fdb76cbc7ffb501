"""The texts a message is indexed by (`ContextRule`, pure logic): the turns before it, oldest
first, then itself; its UTC date first in the lexical text, or in both, or in neither."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given, strategies as st

from pipeline.domain.memory_values import ClaimedMessage, ContextRule

AT = datetime(2023, 5, 8, 23, 30, tzinfo=timezone(timedelta(hours=-4)))  # 9 May in UTC


def _message(content: str, previous: tuple[str, ...] = (), created_at: datetime | None = AT
             ) -> ClaimedMessage:
    return ClaimedMessage(uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), datetime.now(UTC), content,
                          None, previous, created_at)


def test_the_default_rule_takes_two_turns_and_dates_the_lexical_text_only() -> None:
    m = _message("Pepper.", ("We adopted a greyhound.", "What is her name?", "Lovely!"))
    rule = ContextRule()
    assert rule.dense_text(m) == "What is her name?\nLovely!\nPepper."
    assert rule.lexical_text(m) == "9 May 2023\nWhat is her name?\nLovely!\nPepper."


def test_dates_are_utc_and_placed_by_the_setting() -> None:
    m = _message("Hi.", ("Hello.",))
    assert ContextRule(1, "both").dense_text(m) == "9 May 2023\nHello.\nHi."
    assert ContextRule(1, "none").lexical_text(m) == "Hello.\nHi."
    assert ContextRule(1, "lexical").lexical_text(_message("Hi.", created_at=None)) == "Hi."


@given(st.lists(st.text(min_size=1), max_size=6), st.text(min_size=1),
       st.integers(min_value=0, max_value=10))
def test_the_text_ends_with_the_message_after_at_most_turns_turns(
        previous: list[str], content: str, turns: int) -> None:
    text = ContextRule(turns, "none").dense_text(_message(content, tuple(previous)))
    kept = previous[len(previous) - min(turns, len(previous)):]
    assert text == "\n".join([*kept, content])
