"""The texts a message is indexed by (`ContextRule`, pure logic): the turns before it (two for
lexical search, one for the embedder by default), oldest first, then itself; its UTC date first
in the lexical text, or in both, or in neither."""

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


def test_the_default_rule_dates_the_lexical_text_of_two_turns_and_embeds_one() -> None:
    m = _message("Pepper.", ("We adopted a greyhound.", "What is her name?", "Lovely!"))
    rule = ContextRule()
    assert rule.turns == 2
    assert rule.lexical_text(m) == "9 May 2023\nWhat is her name?\nLovely!\nPepper."
    assert rule.dense_text(m) == "Lovely!\nPepper."


def test_dates_are_utc_and_placed_by_the_setting() -> None:
    m = _message("Hi.", ("Hello.",))
    assert ContextRule(1, 1, "both").dense_text(m) == "9 May 2023\nHello.\nHi."
    assert ContextRule(1, 1, "none").lexical_text(m) == "Hello.\nHi."
    assert ContextRule(1, 1, "lexical").lexical_text(_message("Hi.", created_at=None)) == "Hi."


@given(st.lists(st.text(min_size=1), max_size=6), st.text(min_size=1),
       st.integers(min_value=0, max_value=10), st.integers(min_value=0, max_value=10))
def test_each_text_ends_with_the_message_after_at_most_its_turns(
        previous: list[str], content: str, lexical: int, dense: int) -> None:
    rule = ContextRule(lexical, dense, "none")
    m = _message(content, tuple(previous))
    for text, turns in ((rule.lexical_text(m), lexical), (rule.dense_text(m), dense)):
        kept = previous[len(previous) - min(turns, len(previous)):]
        assert text == "\n".join([*kept, content])
