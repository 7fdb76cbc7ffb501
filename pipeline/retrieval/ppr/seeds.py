"""The query's candidate names for PPR seeds: its word n-grams, the longest-match rule, and
which of them the query itself writes as a name.

A query's n-grams (up to `max_tokens` words) are looked up as entity names; where matches
overlap, the longest wins ("New York Times" over "New York" and "Times"), then the earliest.

A seed is *strong* when the words it was matched on overlap a name the heuristic extractor
finds in the query itself (`query_names`): the same rules that decide what a passage names
(capitalised runs with the sentence-start and stop-word rules, acronyms, identifiers, quoted
terms) decide what a question names. "Moonfall Harbor" in "Who directed Moonfall Harbor?" is
strong; "nation" matching an entity "Nation" (a title's first word) is not, nor is "Which" at
the question's start. Search mode `auto` runs PPR only on strong seeds.

Pure functions; the lookup itself is the store's (`pipeline.ports.EntityGraph.match_names`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.domain.mentions import TextField
from pipeline.entities.extractors.heuristic import HeuristicExtractor

# Words of a query as an extractor would keep them in a name: letters and digits, with inner
# apostrophes, hyphens, dots, slashes and underscores ("O'Neil", "U.S.", "parse_http", "3.11").
_WORD = re.compile(r"\w+(?:['\u2019./\-]\w+)*")


@dataclass(frozen=True)
class Ngram:
    """Words [start, end) of the query, their text as written (inner spacing kept), and the
    characters [first, last) of the query that text spans."""

    start: int
    end: int
    text: str
    first: int = 0
    last: int = 0


_POSSESSIVE = re.compile(r"['\u2019]s$", re.IGNORECASE)


def query_ngrams(query: str, *, max_tokens: int = 8) -> list[Ngram]:
    """Every run of 1..`max_tokens` consecutive words of `query`; a run whose last word ends
    in a possessive "'s" comes twice, as written and without it ("Grace Krilanovich's" names
    Grace Krilanovich; "McDonald's" still matches as written)."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(query)]
    grams: list[Ngram] = []
    for i in range(len(words)):
        for j in range(i + 1, min(len(words), i + max_tokens) + 1):
            first, last = words[i][0], words[j - 1][1]
            grams.append(Ngram(i, j, query[first:last], first, last))
            owner = _POSSESSIVE.search(query, first, last)
            if owner is not None and owner.start() > first:
                grams.append(Ngram(i, j, query[first:owner.start()], first, owner.start()))
    return grams


def common_word_match(surface: str, key: str, entity_name: str) -> bool:
    """A lower-case single word of the query ("nation") matching a capitalised name
    ("Nation", an extractor's reading of a sentence or title start): a common word, not a
    name the user meant; it is no seed. Multi-word runs, words written with a capital or a
    digit, and names that are lower-case themselves (identifiers) still match."""
    return (" " not in key and surface == surface.lower() and not any(
        ch.isdigit() for ch in surface) and entity_name != entity_name.lower())


# The query is read as one content field: no title, so every rule applies as in running text.
_QUERY_EXTRACTOR = HeuristicExtractor()


# A quantity ("10%", "5 mg") is a mention but names nothing a question could be about.
_NOT_NAMES = frozenset({"QUANTITY"})
_OPENERS = " \t\"'\u201c\u2018([{"


def query_names(query: str) -> list[tuple[int, int]]:
    """The character spans [start, end) the heuristic extractor reads as names in `query`,
    quantities left out, and so is a lone capitalised word opening a sentence ("Birthplace of
    the ...?"): in a passage the extractor keeps one when the field never writes it in lower
    case, but a question is too short for that to be evidence, and its first word is
    capitalised by grammar. Acronyms and identifiers there still count ("ALDH1 levels ...")."""
    mentions = _QUERY_EXTRACTOR.extract_row([TextField("content", query)])
    return sorted((m.start, m.end) for m in mentions if m.label not in _NOT_NAMES and not (
        m.label == "NAME" and " " not in m.text and _opens_sentence(query, m.start)))


def _opens_sentence(text: str, pos: int) -> bool:
    """Whether only openers stand between `pos` and the text's start or a sentence's end."""
    before = text[:pos].rstrip(_OPENERS)
    return not before or before[-1] in ".!?\n"


def named_in_query(gram: Ngram, names: Sequence[tuple[int, int]]) -> bool:
    """Whether the n-gram's words overlap a span of `query_names`: the query writes it as a
    name, so a seed matched on it is strong."""
    return any(start < gram.last and gram.first < end for start, end in names)


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
