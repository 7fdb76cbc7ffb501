"""The summary rules and the extractive summariser: chatter never enters a summary, a backlog
folds in bounded steps with nothing skipped, the budget holds, salient sentences win."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import given, strategies as st

from pipeline.domain.chunking import count_tokens
from pipeline.embedding.embedders import StaticEmbedder
from pipeline.memory import summary_text as text
from pipeline.memory.ports import Summariser
from pipeline.memory.summarisers import ExtractiveSummariser, _within_budget
from pipeline.ports import Vectors


@given(st.integers(0, 5000), st.integers(2, 200), st.integers(1, 100))
def test_fold_steps_cover_the_backlog_in_bounded_steps(pending: int, window: int,
                                                       max_step: int) -> None:
    steps = text.fold_steps(pending, window, max_step)
    if pending <= window:
        assert steps == []
    else:
        assert sum(steps) == pending - window // 2  # nothing skipped, half a window remains
        assert all(1 <= s <= max_step for s in steps)


def test_fold_steps_of_the_issue_example() -> None:
    assert text.fold_steps(13, 12, 64) == [7]
    assert text.fold_steps(12, 12, 64) == []
    assert text.fold_steps(200, 12, 64) == [64, 64, 64, 2]


def test_chatter_has_no_content_words() -> None:
    for chatter in ["ok", "Thanks!", "ok thanks 👍", "🙂🙂", "lol", "Yes, sure.", "", "hey you"]:
        assert text.is_chatter(chatter), chatter
    for real in ["I adopted a dog named Rex", "Paris in May?", "2023"]:
        assert not text.is_chatter(real), real


def test_sentences_split_at_terminators_and_newlines() -> None:
    assert text.sentences('He said "stop." Then he left!\nNew line') == [
        'He said "stop."', "Then he left!", "New line"]


class _Counting:
    """The static embedder, counting its calls (a real model, not a fake)."""

    name = "static"
    dim = 256

    def __init__(self) -> None:
        self.inner = StaticEmbedder()
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        return self.inner.embed(texts)


def test_extractive_summary_drops_chatter_and_holds_the_budget() -> None:
    summariser: Summariser = ExtractiveSummariser(_Counting())
    lines = ["user: ok", "assistant: thanks!", "user: 👍",
             "user: I moved to Lisbon in March to work on solar panels.",
             "assistant: Lisbon has many sunny days for solar panels.",
             "user: My sister Ana visits Lisbon in June."]
    out = summariser.summarise(None, lines, 40)
    assert "ok" not in out.split() and "👍" not in out
    assert count_tokens(out) <= 40
    assert "Lisbon" in out
    assert summariser.summarise(None, ["user: ok", "assistant: thanks"], 40) == ""


def test_previous_summary_sentences_compete_and_order_is_kept() -> None:
    summariser = ExtractiveSummariser(_Counting())
    previous = "user: My dog Rex is ill. user: The weather is grey."
    lines = ["user: Rex saw the vet on Monday.", "user: The vet gave Rex pills for his dog cough."]
    out = summariser.summarise(previous, lines, 30)
    assert count_tokens(out) <= 30
    # whatever is kept, it is kept in conversation order
    order = [s for s in text.sentences(previous + " " + " ".join(lines)) if s in out]
    assert out == " ".join(order)
    assert "Rex" in out


def test_only_chatter_keeps_the_previous_summary() -> None:
    embedder = _Counting()
    summariser = ExtractiveSummariser(embedder)
    assert summariser.summarise("user: I live in Oslo.", ["user: ok"], 50) == \
        "user: I live in Oslo."


def test_selection_skips_near_repeats() -> None:
    items = [text.Candidate("a", 0, 1), text.Candidate("b", 1, 1), text.Candidate("c", 2, 1)]
    vectors = np.array([[1, 0], [1, 0], [0, 1]], dtype=np.float32)
    kept = text.select(items, [0.9, 0.8, 0.1], vectors, 10)
    assert [c.text for c in kept] == ["a", "c"]


def test_http_answer_is_cut_to_whole_sentences_within_budget() -> None:
    assert _within_budget("One two three. Four five six. Seven.", 9) == \
        "One two three. Four five six."
    assert count_tokens(_within_budget("word " * 100, 10)) <= 10
