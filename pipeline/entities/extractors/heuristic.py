"""The default extractor: rules over the text, no model.

Three scans of a field (runs, numbers and money; identifiers; quotes), each a regular
expression that begins with one character class, so `re` skips the plain lower-case prose in C
and Python code runs only where a mention may start:

- capitalised runs: capitalised words (any script), acronyms, initials and the numbers that
  follow a capitalised word ("Apollo 11", "Python 3.11"), joined by spaces and by lower-case
  connectors ("Bank of England", "Charles de Gaulle"); cut to at most 8 tokens. Function words
  and sentence openers ("The", "However", "Results") are trimmed from either end; a lone
  capitalised word at the start of a sentence is a name only if the field never uses it in
  lower case and it is not a common word. Labels: NAME, or ACRONYM for one acronym ("NASA",
  "U.S.", "COVID-19", "mRNA");
- identifiers: CamelCase, snake_case, dotted and slashed paths, URLs: the whole token is the
  name, its segments joined by spaces an alias (IDENTIFIER);
- numbers with units ("5 mg", "3.2 GHz", "10%", "$1.5 billion"): QUANTITY;
- quoted terms of up to 8 tokens in straight or curly quotes: the span keeps the quotes, the
  name does not (QUOTED).

The identifier and quoted-term rules live in `terms.py` (the spaCy extractor uses them too).

Overlapping candidates: the longest span wins (`spans.longest_first`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence

from pipeline.domain.mentions import Extraction, Mention, TextField
from pipeline.entities.extractors import lexicon
from pipeline.entities.extractors.spans import longest_first, mention
from pipeline.entities.extractors.terms import identifier_and_quoted

MAX_NAME_TOKENS = 8


def _class_of(predicate: str) -> str:
    """A regex character class of every Basic Multilingual Plane character with the property
    (`str.isupper`, ...): Python's `re` has no Unicode categories."""
    ranges: list[str] = []
    start = prev = -2
    for code in range(0x10000):
        if not getattr(chr(code), predicate)():
            continue
        if code != prev + 1:
            if start >= 0:
                ranges.append(_range(start, prev))
            start = code
        prev = code
    ranges.append(_range(start, prev))
    return "[" + "".join(ranges) + "]"


def _range(first: int, last: int) -> str:
    low, high = re.escape(chr(first)), re.escape(chr(last))
    return low if first == last else f"{low}-{high}"


_UP = _class_of("isupper")
_ABBREVIATIONS = "|".join(
    sorted(w.capitalize() for w in lexicon.TITLES | lexicon.NAME_ABBREVIATIONS))
_NUM = r"\d[\d,]*(?:\.\d+)?(?:[-\u2013]\d[\d,]*(?:\.\d+)?)?"
_UNIT = lexicon.UNIT_PATTERN
_CONNECTOR = "(?:" + "|".join(
    sorted(map(re.escape, lexicon.CONNECTORS), key=len, reverse=True)) + ")"
# A token of a capitalised run: dotted acronym or initial ("U.S.", "J."), an abbreviation with
# its period ("St.", "Inc."), or a capitalised word with what may continue an identifier.
_CAP = rf"""(?:
    (?:{_UP}\.){{2,}}
  | {_UP}\.(?=[ \t]+{_UP})
  | (?:{_ABBREVIATIONS})\.(?=[ \t]+[^\W\d_])
  | {_UP}[\w'\u2019&]*(?:-[\w'\u2019]+)*(?:(?:\.|::)[^\W\d_]\w*)*
)"""
# A number continues a run only when no unit follows it ("Apollo 11" yes, "Group 5 mg" no).
_RUN_NUM = rf"\d+(?:\.\d+)*(?![\w%°])(?![ \t]?(?:{_UNIT})(?![^\W_]))"
# The tail of a run's first token, its first character (a capital) already read.
_ABBREVIATION_TAILS = "|".join(
    rf"(?<={re.escape(a[0])}){re.escape(a[1:])}" for a in _ABBREVIATIONS.split("|"))
_CAP_TAIL = rf"""(?:
    \.(?:{_UP}\.)+
  | \.(?=[ \t]+{_UP})
  | (?:{_ABBREVIATION_TAILS})\.(?=[ \t]+[^\W\d_])
  | [\w'\u2019&]*(?:-[\w'\u2019]+)*(?:(?:\.|::)[^\W\d_]\w*)*
)"""
# A run, a number or a sum of money. The pattern opens with one character class (a capital, a
# digit, a currency sign), so `re` skips every other character in C, which is what keeps the
# extractor fast: prose is mostly lower-case words. The alternatives then read on from that
# first character (a lookbehind says which it was), and the scan resumes after the match.
_SCAN = re.compile(
    rf"""
    [{_UP[1:-1]}\d$€£¥](?<![\w'\u2019.].)
    (?:
      (?P<run>(?<={_UP}){_CAP_TAIL}(?:[ \t]+(?:{_CONNECTOR}[ \t]+){{0,3}}(?:{_CAP}|{_RUN_NUM}))*)
    | (?P<money>(?<=[$€£¥]){_NUM}(?:[ \t]?(?:million|billion|trillion|thousand|[kKmMbB]n?)\b)?)
    | (?P<num>(?<=\d)[\d,]*(?:\.\d+)?(?:[-\u2013]\d[\d,]*(?:\.\d+)?)?
        (?:[ \t]?(?P<unit>{_UNIT})(?![^\W_]))?)
    )
    """,
    re.VERBOSE,
)
_HYPHEN_LOWER = re.compile(r"-(?=[a-z])")
_TOKEN = re.compile(r"\S+")
_OPENERS = " \t\"'“\u2018«([{*•·-\u2013—"
_SENTENCE_ENDS = ".!?:;…"
_ADVERB_SUFFIXES = ("ally", "ingly", "ently", "antly", "ively", "ously", "edly", "ately")


class HeuristicExtractor:
    """Rule-based entity spans (see the module docstring); pure, thread-safe, no model."""

    name = "heuristic"

    def __init__(self, *, max_mentions: int = 200) -> None:
        if max_mentions < 1:
            raise ValueError("max_mentions must be at least 1")
        self.max_mentions = max_mentions

    def extract(self, rows: Sequence[Sequence[TextField]]) -> list[Extraction]:
        """One `Extraction` per row, in order; triples are never read by rules."""
        return [Extraction(mentions=self.extract_row(row)) for row in rows]

    def extract_row(self, fields: Sequence[TextField]) -> list[Mention]:
        """The mentions of one row's fields, overlaps resolved and capped."""
        candidates = [m for f in fields if f.text for m in candidates_in(f)]
        return longest_first(candidates, fields, self.max_mentions)


def candidates_in(field: TextField) -> list[Mention]:
    """Every rule's candidate mentions in one field, overlapping ones included."""
    out: list[Mention] = []
    for match in _SCAN.finditer(field.text):
        pos, kind = match.start(), match.lastgroup
        if kind == "run":
            run = match.group()
            if " " in run or "\t" in run:
                out.extend(_run(field, pos, run))
            else:  # most runs are one word: no splitting to do
                kind, cut, stop = _classify(run)
                found = None if stop else _lone(field, pos, pos + cut, kind, pos)
                if found is not None:
                    out.append(found)
        elif kind == "money" or match.group("unit"):
            out.append(mention(field, pos, match.end(), "QUANTITY"))
    out.extend(identifier_and_quoted(field))
    return out


class _Token:
    """One token of a capitalised run, with what the run's rules need to know about it."""

    __slots__ = ("end", "kind", "start", "stop")

    def __init__(self, start: int, end: int, kind: str, stop: bool) -> None:
        self.start, self.end, self.kind, self.stop = start, end, kind, stop


def _run(field: TextField, offset: int, run: str) -> Iterator[Mention]:
    """The names in one capitalised run: split at "and" without an "of" before it, at a cut
    word ("Alzheimer-related", "England's"), and into pieces of at most 8 tokens."""
    tokens: list[_Token] = []
    found = list(_TOKEN.finditer(run))
    for i, m in enumerate(found):
        tok, start = m.group(), offset + m.start()
        kind, cut, stop = _classify(tok)
        if stop and tok.lower() in lexicon.NAME_PREFIXES and i + 1 < len(found) \
                and _classify(found[i + 1].group())[0] in ("word", "acronym") \
                and not _classify(found[i + 1].group())[2]:
            stop = False  # "New York", "North Carolina": an adjective that opens a name
        if kind == "conn" and tok in lexicon.AND_CONNECTORS and not any(
                field.text[t.start:t.end] in lexicon.AND_ENABLERS for t in tokens):
            yield from _names(field, tokens)
            tokens = []
            continue
        if stop:
            # A capitalised function word inside a run separates two names
            # ("IMPORTANCE The 2008 Physical Activity Guidelines").
            yield from _names(field, tokens)
            tokens = []
            continue
        if cut < len(tok):
            tokens.append(_Token(start, start + cut, kind, stop))
            yield from _names(field, tokens)
            tokens = []
            continue
        tokens.append(_Token(start, start + len(tok), kind, stop))
    yield from _names(field, tokens)


def _classify(tok: str) -> tuple[str, int, bool]:
    """(kind, how many characters of `tok` belong to the run, whether those are a stop word);
    remembered, as a text repeats its names ("GH", "IGF1" ten times in one abstract)."""
    known = _CLASSIFIED.get(tok)
    if known is None:
        if len(_CLASSIFIED) >= _CLASSIFIED_MAX:
            _CLASSIFIED.clear()
        kind, cut = _classify_new(tok)
        stop = (kind != "conn" and tok[:cut].lower() in lexicon.STOP_WORDS
                and tok[:cut] not in lexicon.ACRONYMS_NOT_STOP)
        known = _CLASSIFIED[tok] = (kind, cut, stop)
    return known


_CLASSIFIED: dict[str, tuple[str, int, bool]] = {}
_CLASSIFIED_MAX = 100_000


def _classify_new(tok: str) -> tuple[str, int]:
    if tok[0].isdigit():
        return "num", len(tok)
    if tok[0].islower() or tok == "&":
        return "conn", len(tok)
    if tok.endswith(("'s", "\u2019s")) and len(tok) > 2:
        return _classify_new(tok[:-2])[0], len(tok) - 2
    hyphen = _HYPHEN_LOWER.search(tok)
    if hyphen and hyphen.start() > 0 and not lexicon.ACRONYM.fullmatch(tok):
        return _classify_new(tok[:hyphen.start()])[0], hyphen.start()
    if tok.endswith(".") and not lexicon.ACRONYM.fullmatch(tok):
        word = tok[:-1].lower()
        if word in lexicon.TITLES:
            return "title", len(tok)
        return ("initial" if len(word) == 1 else "abbrev"), len(tok)
    if lexicon.ACRONYM.fullmatch(tok) and sum(ch.isupper() for ch in tok) >= 2:
        return "acronym", len(tok)
    if "_" in tok or "." in tok or "::" in tok or lexicon.CAMEL.search(tok):
        return "ident", len(tok)
    return "word", len(tok)


def _names(field: TextField, tokens: list[_Token]) -> Iterator[Mention]:
    """Trim what cannot open or close a name, then emit it in pieces of at most 8 tokens."""
    lo, hi = 0, len(tokens)
    while lo < hi and (tokens[lo].stop or tokens[lo].kind in ("conn", "num", "title")):
        lo += 1
    while hi > lo and (tokens[hi - 1].stop or tokens[hi - 1].kind in ("conn", "title", "initial")):
        hi -= 1
    if lo == hi:
        return
    first = tokens[lo]
    if hi - lo > MAX_NAME_TOKENS:
        yield from _names(field, tokens[lo:lo + MAX_NAME_TOKENS])
        yield from _names(field, tokens[lo + MAX_NAME_TOKENS:hi])
        return
    if hi - lo > 1:
        yield mention(field, first.start, tokens[hi - 1].end, "NAME")
        return
    found = _lone(field, first.start, first.end, first.kind, tokens[0].start)
    if found is not None:
        yield found


def _lone(field: TextField, start: int, end: int, kind: str, run_start: int) -> Mention | None:
    """The mention one token (`field.text[start:end]`, of `kind`) makes on its own, if any;
    `run_start` is where its run began (for the sentence-start rule)."""
    if kind in ("conn", "num", "title", "initial"):
        return None
    text = field.text[start:end]
    if kind == "acronym":
        return None if lexicon.ROMAN.fullmatch(text) else mention(
            field, start, end, "ACRONYM")
    if kind == "ident":
        return mention(field, start, end, "IDENTIFIER")
    if len(text) < 2 or (_sentence_start(field.text, run_start) and (
            _used_lower(field.text, text) or _opening_adverb(field.text, start, end))):
        return None
    return mention(field, start, end, "NAME")


def _opening_adverb(text: str, start: int, end: int) -> bool:
    """"Initially, ...", "Interestingly, ...": a sentence-opening adverb before a comma (by
    the suffixes of adverbs, not any -ly: "Italy, ..." and "Kimberly, ..." are names)."""
    return text.startswith(",", end) and text.endswith(_ADVERB_SUFFIXES, start, end)


def _sentence_start(text: str, pos: int) -> bool:
    """Whether `pos` opens a sentence, a line or a clause after a colon."""
    i = pos - 1
    while i >= 0 and text[i] in _OPENERS:
        i -= 1
    if i < 0 or text[i] in "\n\r":
        return True
    if text[i] not in _SENTENCE_ENDS:
        return False
    if text[i] != ".":
        return True
    word_start = i
    while word_start > 0 and not text[word_start - 1].isspace():
        word_start -= 1
    before = text[word_start:i].lstrip(_OPENERS).lower()
    return not (before in lexicon.NOT_SENTENCE_END or (len(before) == 1 and before.isalpha()))


def _used_lower(text: str, word: str) -> bool:
    """Whether the field uses `word` in lower case as a word of its own: then a capitalised
    copy at a sentence's start is that common word, not a name."""
    lower = word.lower()
    if len(text) > _SCAN_LIMIT:
        return lower in _words_of(text)
    start = text.find(lower)
    while start >= 0:
        end = start + len(lower)
        if (start == 0 or not text[start - 1].isalnum()) and (
                end == len(text) or not text[end].isalnum()):
            return True
        start = text.find(lower, end)
    return False


# Past this length a field's words are collected once, into a set: a search per sentence-start
# word would make a long field of many sentences quadratic.
_SCAN_LIMIT = 4000
_ALNUM_RUN = re.compile(r"[^\W_]+")


@functools.lru_cache(maxsize=4)
def _words_of(text: str) -> frozenset[str]:
    return frozenset(_ALNUM_RUN.findall(text))
