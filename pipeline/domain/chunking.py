"""Deterministic, structure-aware chunking of a parent's content into parts.

Tokens are an approximation of model tokens: each match of `\\w+|[^\\w\\s]` (a run of word
characters, or one punctuation/symbol character) counts as one. Real subword tokenizers produce
more tokens for rare words, so callers pick `max_tokens` with some headroom for their embedder.

Strategy, in order of preference for where a chunk ends:
1. at a paragraph boundary (a blank line); consecutive paragraphs are packed up to `max_tokens`;
2. inside a paragraph too long for one chunk, at a sentence (or line) boundary;
3. inside a sentence too long for one chunk, at any token boundary (a hard split).
When a chunk ends inside a paragraph, the next chunk starts up to `overlap_tokens` tokens earlier so
that context carries across the cut (less when a long sentence leaves less room; hard-split windows
are `max_tokens - overlap_tokens` long so they always get the full overlap). Every chunk holds at
most `max_tokens` tokens, with no exception, and all of it is a slice of the input.
Known limit of the approximation: one very long run of word characters (a base64 blob, say) is one
token, so a chunk's length in characters is not bounded by `max_tokens`.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from itertools import pairwise

TOKEN_RE = re.compile(r"\w+|[^\w\s]")
# A blank line: a newline, optional non-newline whitespace, another newline.
_BLANK_LINE_RE = re.compile(r"\n[^\S\n]*\n")
# CJK full stop / exclamation / question marks: CJK text puts no space after a sentence.
_CJK_TERMINATORS = frozenset("\u3002\uff01\uff1f")
_TERMINATORS = frozenset(".!?\u2026") | _CJK_TERMINATORS
# Closing quotes and brackets that may follow a terminator: `He said "stop." Then ...`
_CLOSERS = frozenset("\"')]}\u00bb\u201d\u2019")

# Fixed namespace for part ids, so part ids never collide with other uuid5 derivations.
_PART_NAMESPACE = uuid.UUID("6f1c1d5e-3b1a-5c7e-9d0b-2a6e8f4c9b10")


@dataclass(frozen=True)
class Chunk:
    """One part of a text: `text == original[start:end]`, `position` counts from 0."""

    position: int
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class _Piece:
    """A run of tokens [first, last) that must not be split further, tagged with its paragraph."""

    first: int
    last: int
    paragraph: int


def tokenize(text: str) -> list[tuple[int, int]]:
    """The (start, end) character spans of the approximate tokens of `text`."""
    return [m.span() for m in TOKEN_RE.finditer(text)]


def count_tokens(text: str) -> int:
    """The number of approximate tokens in `text` (see the module docstring)."""
    return sum(1 for _ in TOKEN_RE.finditer(text))


def _paragraphs(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Token index ranges [first, last) of each non-empty paragraph."""
    breaks = [m.start() for m in _BLANK_LINE_RE.finditer(text)]
    out: list[tuple[int, int]] = []
    first = 0
    b = 0
    for i, (start, _end) in enumerate(spans):
        # A new paragraph starts at the first token past a blank line.
        advanced = False
        while b < len(breaks) and breaks[b] < start:
            b += 1
            advanced = True
        if advanced and i > first:
            out.append((first, i))
            first = i
    if spans:
        out.append((first, len(spans)))
    return out


def _sentence_ends(text: str, spans: list[tuple[int, int]], first: int, last: int) -> list[int]:
    """Token indices (exclusive ends) in (first, last) after which a sentence or line ends."""
    ends: list[int] = []
    for i in range(first, last - 1):
        gap = text[spans[i][1] : spans[i + 1][0]]
        tok = text[spans[i][0] : spans[i][1]]
        if "\n" in gap or tok in _CJK_TERMINATORS:
            ends.append(i + 1)
            continue
        if not gap:
            continue  # no whitespace: "3.5", "e.g." and the like never end a sentence
        prev = text[spans[i - 1][0] : spans[i - 1][1]] if i > first else ""
        prev_touches = i > first and spans[i - 1][1] == spans[i][0]
        if tok in _TERMINATORS or (tok in _CLOSERS and prev_touches and prev in _TERMINATORS):
            ends.append(i + 1)
    return ends


def _pieces(
    text: str, spans: list[tuple[int, int]], max_tokens: int, budget: int
) -> list[_Piece]:
    """Split the text into unsplittable pieces: whole paragraphs when they fit in one chunk,
    else sentences; a sentence longer than one chunk is hard-split into `budget`-token windows
    (budget = max_tokens - overlap_tokens, so each window plus its overlap fits in a chunk)."""
    out: list[_Piece] = []
    for p, (first, last) in enumerate(_paragraphs(text, spans)):
        if last - first <= max_tokens:
            out.append(_Piece(first, last, p))
            continue
        for a, b in pairwise([first, *_sentence_ends(text, spans, first, last), last]):
            if b - a <= max_tokens:
                out.append(_Piece(a, b, p))
                continue
            out.extend(_Piece(s, min(s + budget, b), p) for s in range(a, b, budget))
    return out


def chunk_text(text: str, *, max_tokens: int = 200, overlap_tokens: int = 30) -> list[Chunk]:
    """Split `text` into ordered chunks of at most `max_tokens` approximate tokens each.

    Raises ValueError unless `max_tokens >= 1` and `0 <= overlap_tokens < max_tokens`.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    if not 0 <= overlap_tokens < max_tokens:
        raise ValueError("overlap_tokens must be >= 0 and smaller than max_tokens")
    spans = tokenize(text)
    if not spans:
        return []
    pieces = _pieces(text, spans, max_tokens, max_tokens - overlap_tokens)

    ranges: list[tuple[int, int]] = []  # token ranges [first, last) of the chunks
    start, end, paragraph = pieces[0].first, pieces[0].last, pieces[0].paragraph
    for piece in pieces[1:]:
        if piece.last - start <= max_tokens:
            end, paragraph = piece.last, piece.paragraph
            continue
        ranges.append((start, end))
        start = piece.first
        if piece.paragraph == paragraph:
            # Cut inside a paragraph: repeat the tail of the previous chunk, shortened when a
            # long sentence leaves less room. The previous chunk plus this piece overflowed,
            # so it is longer than the overlap and `start` still moves forward.
            overlap = min(overlap_tokens, max_tokens - (piece.last - piece.first))
            start = max(ranges[-1][0] + 1, piece.first - overlap)
        end, paragraph = piece.last, piece.paragraph
    ranges.append((start, end))

    chunks: list[Chunk] = []
    for position, (first, last) in enumerate(ranges):
        c_start, c_end = spans[first][0], spans[last - 1][1]
        chunks.append(Chunk(position, text[c_start:c_end], c_start, c_end))
    return chunks


def part_id(namespace: uuid.UUID, parent_id: uuid.UUID, position: int) -> uuid.UUID:
    """The deterministic id of the part at `position` of `parent_id` in `namespace` (stable
    across replays). The namespace is part of the derivation: another tenant that knows the
    parent's id cannot compute, and squat, the ids of its parts."""
    if position < 0:
        raise ValueError("position must be >= 0")
    return uuid.uuid5(_PART_NAMESPACE, f"{namespace}/{parent_id}/{position}")


def explicit_part_id(namespace: uuid.UUID, parent_id: uuid.UUID, position: int) -> uuid.UUID:
    """The id of an explicit part sent without one: deterministic, derived within `namespace`
    like `part_id`, and never equal to the id of a part the pipeline cuts from the parent's
    content at the same position."""
    if position < 0:
        raise ValueError("position must be >= 0")
    return uuid.uuid5(_PART_NAMESPACE, f"{namespace}/{parent_id}/explicit/{position}")
