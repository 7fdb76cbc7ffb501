"""The query's candidate names for PPR seeds: its word n-grams, and the longest-match rule.

A query's n-grams (up to `max_tokens` words) are looked up as entity names; where matches
overlap, the longest wins ("New York Times" over "New York" and "Times"), then the earliest.
Pure functions; the lookup itself is the store's (`pipeline.ports.EntityGraph.match_names`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# Words of a query as an extractor would keep them in a name: letters and digits, with inner
# apostrophes, hyphens, dots, slashes and underscores ("O'Neil", "U.S.", "parse_http", "3.11").
_WORD = re.compile(r"\w+(?:['\u2019./\-]\w+)*")


@dataclass(frozen=True)
class Ngram:
    """Words [start, end) of the query, and their text as written (inner spacing kept)."""

    start: int
    end: int
    text: str


def query_ngrams(query: str, *, max_tokens: int = 8) -> list[Ngram]:
    """Every run of 1..`max_tokens` consecutive words of `query`."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(query)]
    grams: list[Ngram] = []
    for i in range(len(words)):
        for j in range(i + 1, min(len(words), i + max_tokens) + 1):
            grams.append(Ngram(i, j, query[words[i][0]:words[j - 1][1]]))
    return grams


def common_word_match(surface: str, key: str, entity_name: str) -> bool:
    """A lower-case single word of the query ("nation") matching a capitalised name
    ("Nation", an extractor's reading of a sentence or title start): a common word, not a
    name the user meant; it is no seed. Multi-word runs, words written with a capital or a
    digit, and names that are lower-case themselves (identifiers) still match."""
    return (" " not in key and surface == surface.lower() and not any(
        ch.isdigit() for ch in surface) and entity_name != entity_name.lower())


def longest_matches(matched: Sequence[Ngram]) -> list[Ngram]:
    """Of the n-grams that matched, the longest first, then the earliest, skipping any that
    overlaps one already taken; returned in query order."""
    taken: list[Ngram] = []
    used: set[int] = set()
    for gram in sorted(matched, key=lambda g: (-(g.end - g.start), g.start)):
        span = set(range(gram.start, gram.end))
        if span & used:
            continue
        used |= span
        taken.append(gram)
    return sorted(taken, key=lambda g: g.start)
