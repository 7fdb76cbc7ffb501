"""Index text rendering: deterministic, sorted, capped; the hash tracks the text."""

from __future__ import annotations

from typing import Any

from hypothesis import given, strategies as st

from pipeline.domain.index_text import (
    embedder_text,
    entity_index_text,
    part_index_text,
    text_hash,
)


def test_entity_index_text_layout() -> None:
    text = entity_index_text(
        "Acme warehouse rollout",
        "Forty arms across three sites.",
        {"stage": "prospect", "amount": 420000, "public": False, "tags": ["a", "b"],
         "nested": {"x": 1}, "empty": None, "ratio": 0.5, "blank": "  "},
        "Body text.",
    )
    assert text == (
        "Acme warehouse rollout\nForty arms across three sites.\n"
        "amount: 420000\npublic: false\nratio: 0.5\nstage: prospect\ntags: a, b\nBody text."
    )


def test_missing_parts_are_skipped() -> None:
    assert entity_index_text(None, None, None, None) == ""
    assert entity_index_text("T", "  ", {}, "") == "T"


def test_content_is_capped_at_a_word_boundary() -> None:
    content = "word " * 1000
    text = entity_index_text("T", None, None, content, content_cap_chars=103)
    body = text.split("\n", 1)[1]
    assert len(body) <= 103 and body.endswith("word")
    assert entity_index_text("T", None, None, "x" * 50, content_cap_chars=10) == "T\n" + "x" * 10
    assert entity_index_text("T", None, None, "body", content_cap_chars=0) == "T"


props = st.dictionaries(
    st.from_regex(r"[a-z_]{1,8}", fullmatch=True),
    st.one_of(st.text(max_size=5), st.integers(), st.booleans(), st.none(),
              st.lists(st.integers(), max_size=3)),
    max_size=6,
)


@given(props)
def test_property_order_does_not_matter(properties: dict[str, Any]) -> None:
    reordered = dict(reversed(list(properties.items())))
    a = entity_index_text("T", "S", properties, "C")
    assert a == entity_index_text("T", "S", reordered, "C")
    assert text_hash(a) == text_hash(entity_index_text("T", "S", reordered, "C"))


def test_part_index_text() -> None:
    assert part_index_text("Kickoff call", " Budget owner is the COO. ") == (
        "Kickoff call\nBudget owner is the COO."
    )
    assert part_index_text(None, "text") == "text"
    assert part_index_text("Title", "") == "Title"


def test_text_hash() -> None:
    assert text_hash("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert text_hash("a") != text_hash("a ")
    assert len(text_hash("naïve 日本")) == 64


@given(st.text(max_size=400), st.integers(min_value=1, max_value=300))
def test_embedder_text_is_a_capped_prefix(text: str, cap: int) -> None:
    sent = embedder_text(text, cap_chars=cap)
    assert len(sent) <= cap and text.startswith(sent)
    if len(text) <= cap:
        assert sent == text
