"""Chunking: coverage, order, size bound, slicing and determinism, plus the structural choices."""

from __future__ import annotations

import re
import uuid
from itertools import pairwise

import pytest
from hypothesis import given, settings, strategies as st

from pipeline.domain.chunking import Chunk, chunk_text, count_tokens, explicit_part_id, part_id

words = st.sampled_from(
    ["the", "Acme", "pilot", "42", "3.5", "e.g.", "naïve", "日本語", "--", "x" * 40, "ok", "é"]
)
separators = st.sampled_from([" ", " ", " ", ". ", "! ", "\n", "\n\n", " \n \n", ", ", "\t", ""])
texts = st.lists(st.tuples(words, separators), max_size=400).map(
    lambda pairs: "".join(w + s for w, s in pairs)
)
params = st.integers(1, 60).flatmap(lambda m: st.tuples(st.just(m), st.integers(0, m - 1)))


def check_invariants(text: str, chunks: list[Chunk], max_tokens: int) -> None:
    covered = [False] * len(text)
    for i, chunk in enumerate(chunks):
        assert chunk.position == i
        assert chunk.text == text[chunk.start : chunk.end]
        assert chunk.text and chunk.text == chunk.text.strip()
        assert count_tokens(chunk.text) <= max_tokens
        for j in range(chunk.start, chunk.end):
            covered[j] = True
    for a, b in pairwise(chunks):
        assert a.start < b.start and a.end < b.end  # ordered, and each chunk adds text
    for j, ch in enumerate(text):
        if not ch.isspace():
            assert covered[j], f"character {j} ({ch!r}) is in no chunk"


@settings(max_examples=300)
@given(texts, params)
def test_chunks_cover_order_bound_slice(text: str, limits: tuple[int, int]) -> None:
    max_tokens, overlap = limits
    chunks = chunk_text(text, max_tokens=max_tokens, overlap_tokens=overlap)
    check_invariants(text, chunks, max_tokens)
    assert chunk_text(text, max_tokens=max_tokens, overlap_tokens=overlap) == chunks
    assert (chunks == []) == (text.strip() == "")


@given(st.text(max_size=600), params)
def test_arbitrary_unicode_text(text: str, limits: tuple[int, int]) -> None:
    max_tokens, overlap = limits
    check_invariants(text, chunk_text(text, max_tokens=max_tokens, overlap_tokens=overlap),
                     max_tokens)


def test_empty_and_whitespace_text() -> None:
    assert chunk_text("") == []
    assert chunk_text(" \n\n\t ") == []


def test_small_paragraphs_are_packed_without_overlap() -> None:
    text = "one two three.\n\nfour five six.\n\nseven eight nine."  # 4 tokens per paragraph
    chunks = chunk_text(text, max_tokens=8, overlap_tokens=2)
    assert [c.text for c in chunks] == [
        "one two three.\n\nfour five six.", "seven eight nine."
    ]
    assert len(chunk_text(text)) == 1


def test_long_paragraph_splits_at_sentences_with_overlap() -> None:
    text = "Alpha beta gamma delta. Epsilon zeta eta theta. Iota kappa lambda mu."
    chunks = chunk_text(text, max_tokens=10, overlap_tokens=2)
    assert [c.text for c in chunks] == [
        "Alpha beta gamma delta. Epsilon zeta eta theta.",
        "theta. Iota kappa lambda mu.",  # the last 2 tokens of the previous chunk carried over
    ]


def test_no_overlap_across_a_paragraph_boundary() -> None:
    text = "a b c d e f g h.\n\nNext paragraph here."
    chunks = chunk_text(text, max_tokens=9, overlap_tokens=3)
    assert [c.text for c in chunks] == ["a b c d e f g h.", "Next paragraph here."]


def test_huge_sentence_is_hard_split_on_token_boundaries() -> None:
    text = " ".join(f"w{i}" for i in range(25))
    chunks = chunk_text(text, max_tokens=10, overlap_tokens=3)
    # windows of 7 new tokens, each next chunk repeating the previous 3
    assert [(c.text.split()[0], c.text.split()[-1]) for c in chunks] == [
        ("w0", "w6"), ("w4", "w13"), ("w11", "w20"), ("w18", "w24")
    ]


def test_decimals_and_abbreviations_do_not_end_sentences() -> None:
    text = "Revenue grew 3.5 percent in Q3 e.g. in Rotterdam. Then it fell sharply overall."
    chunks = chunk_text(text, max_tokens=16, overlap_tokens=0)
    assert chunks[0].text == "Revenue grew 3.5 percent in Q3 e.g. in Rotterdam."


def test_line_breaks_inside_a_paragraph_are_split_points() -> None:
    text = "- item one is here\n- item two is here\n- item three is here"
    chunks = chunk_text(text, max_tokens=12, overlap_tokens=0)
    assert [c.text for c in chunks] == ["- item one is here\n- item two is here",
                                        "- item three is here"]


def test_tokens_are_words_and_single_symbols() -> None:
    assert count_tokens("SOC 2 report, v1.2!") == 8
    assert re.findall(r"\w+|[^\w\s]", "a-b") == ["a", "-", "b"]


@pytest.mark.parametrize(("max_tokens", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_invalid_parameters(max_tokens: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        chunk_text("text", max_tokens=max_tokens, overlap_tokens=overlap)


def test_part_ids_are_deterministic_and_distinct() -> None:
    parent = uuid.UUID("0b9d7c7e-1111-4a2b-8c3d-000000000003")
    ns = uuid.UUID("8f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b")
    assert part_id(ns, parent, 0) == part_id(ns, parent, 0)
    assert part_id(ns, parent, 0) != part_id(ns, parent, 1)
    assert part_id(ns, parent, 0) != part_id(ns, uuid.uuid4(), 0)
    # another namespace cannot compute (and squat) this namespace's part ids
    assert part_id(ns, parent, 0) != part_id(uuid.uuid4(), parent, 0)
    assert part_id(ns, parent, 0) != explicit_part_id(ns, parent, 0)
    assert part_id(ns, parent, 0).version == 5
    with pytest.raises(ValueError):
        part_id(ns, parent, -1)
    with pytest.raises(ValueError):
        explicit_part_id(ns, parent, -1)
