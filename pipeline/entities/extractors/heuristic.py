"""The default extractor: rules over the text, no model.

One regular expression walks a field and stops only where a mention may start, so the plain
lower-case prose between them costs no Python work:

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

Overlapping candidates: the longest span wins (`spans.longest_first`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from pipeline.domain.mentions import Extraction, Mention, TextField
from pipeline.entities.extractors import lexicon
from pipeline.entities.extractors.spans import longest_first
from pipeline.entities.names import normalise, segments

MAX_NAME_TOKENS = 8
MAX_QUOTED_TOKENS = 8


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
# Where a run, a number or a sum of money may start: a capital, a digit or a currency sign that
# does not continue a word or a number. One leading character class lets `re` skip every other
# character in C, which is what keeps the extractor fast: prose is mostly lower-case words.
_STARTS = re.compile(rf"[{_UP[1:-1]}\d$€£¥](?<![\w'\u2019.].)")
_AT_START = re.compile(
    rf"""
    (?P<run>{_CAP}(?:[ \t]+(?:{_CONNECTOR}[ \t]+){{0,3}}(?:{_CAP}|{_RUN_NUM}))*)
  | (?P<money>[$€£¥]{_NUM}(?:[ \t]?(?:million|billion|trillion|thousand|[kKmMbB]n?)\b)?)
  | (?P<num>{_NUM}(?:[ \t]?(?P<unit>{_UNIT})(?![^\W_]))?)
    """,
    re.VERBOSE,
)
# Where an identifier shows: an underscore, a slash, "::", a dot inside a word, a camel hump.
# The token around the hit is then read whole (the same trick: the class comes first).
_IDENT_HIT = re.compile(r"[_/\\:.A-Z](?:(?<=[_/\\])|(?<=\.)(?=\w)|(?<=:)(?=:)|(?<=[a-z0-9][A-Z]))")
_IDENT_BODY = re.compile(r"[\w$~./\\:-]*")
_IDENT_CHARS = frozenset("_$~./\\:-")
# The opening quote comes first, as a class, for the same reason as `_STARTS`; a straight single
# quote counts only outside a word (not the apostrophe of "don't").
_QUOTED = re.compile(
    r"""["“«\u2018'](?:(?<=")(?P<a>[^"\n]{1,200})"|(?<=“)(?P<b>[^”\n]{1,200})”"""
    r"""|(?<=«)(?P<c>[^»\n]{1,200})»|(?<=\u2018)(?P<d>[^\u2019\n]{1,200})\u2019"""
    r"""|(?<![\w]')(?<=')(?P<e>[^'\n]{1,200})'(?![\w]))"""
)
_QUOTES = ('"', "“", "«", "\u2018", "'")
_ACRONYM = re.compile(r"(?:[^\W\d_]\.){2,}|[a-z]{0,3}[A-Z][A-Z0-9]*(?:[-&][A-Z0-9]+)*s?")
_IDENT_SHAPE = re.compile(r"_|[a-z0-9][A-Z]|[A-Z]{2}[a-z]|(?:[./\\]|::)\w|://")
_CAMEL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")
_LOWER_SUFFIX = re.compile(r"(?:-[a-z]+)+$")
_HYPHEN_LOWER = re.compile(r"-(?=[a-z])")
_TOKEN = re.compile(r"\S+")
_IDENT_TRAILING = ".,;:!?)]}\"'”\u2019»/"
_OPENERS = " \t\"'“\u2018«([{*•·-\u2013—"
_SENTENCE_ENDS = ".!?:;…"
_WORD_EDGES = ".,;:!?()"


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


def candidates_in(field: TextField) -> Iterator[Mention]:
    """Every rule's candidate mentions in one field, overlapping ones included."""
    text = field.text
    last = 0
    for hit in _STARTS.finditer(text):
        pos = hit.start()
        if pos < last:
            continue  # a capital inside the run just read
        match = _AT_START.match(text, pos)
        if match is None:
            continue
        last = match.end()
        kind = match.lastgroup
        if kind == "run":
            yield from _run(field, pos, match.group())
        elif kind == "money" or match.group("unit"):
            yield _mention(field, pos, last, "QUANTITY")
    yield from identifier_and_quoted(field)


def identifier_and_quoted(field: TextField) -> Iterator[Mention]:
    """The identifier and quoted-term candidates of one field (the spaCy extractor adds these
    to its model's entities)."""
    yield from _identifiers(field)
    if any(q in field.text for q in _QUOTES):
        yield from _quoted(field)


def _identifiers(field: TextField) -> Iterator[Mention]:
    text = field.text
    last = 0
    for hit in _IDENT_HIT.finditer(text):
        if hit.start() < last:
            continue  # another separator of the token just read
        start = hit.start()
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in _IDENT_CHARS):
            start -= 1
        last = _IDENT_BODY.match(text, hit.start()).end()  # type: ignore[union-attr]
        token = text[start:last]
        lead = len(token) - len(token.lstrip(":-"))
        found = _identifier(field, start + lead, token[lead:])
        if found is not None:
            yield found


def _mention(field: TextField, start: int, end: int, label: str,
             name: str | None = None) -> Mention:
    text = field.text[start:end]
    aliases: tuple[str, ...] = ()
    if label == "IDENTIFIER":
        joined = " ".join(segments(text))
        aliases = (joined,) if joined and joined != normalise(text) else ()
    elif label == "ACRONYM" and "." in text:
        aliases = (text.replace(".", ""),)  # "U.S." is also written "US"
    return Mention(name=name or text, label=label, field=field.field, start=start, end=end,
                   text=text, aliases=aliases)


def _identifier(field: TextField, start: int, token: str) -> Mention | None:
    token = _LOWER_SUFFIX.sub("", token.rstrip(_IDENT_TRAILING))  # "ConA-induced" -> "ConA"
    if not token:
        return None
    if "/" in token and "://" not in token and not _is_path(token):
        return None  # "and/or", "mg/kg", "TCP/IP": a slash between two words is not a path
    if not any(ch.isalpha() for ch in token) or not _IDENT_SHAPE.search(token):
        return None
    if _ACRONYM.fullmatch(token) and sum(ch.isupper() for ch in token) >= 2:
        return _mention(field, start, start + len(token), "ACRONYM")  # "mRNA", "siRNA"
    if "." in token and "/" not in token and "_" not in token and not _CAMEL.search(token):
        pieces = token.split(".")
        if all(len(p) <= 1 for p in pieces) or all(p.isdigit() for p in pieces if p):
            return None  # "e.g", "i.e", version-like digit runs
    return _mention(field, start, start + len(token), "IDENTIFIER")


def _is_path(token: str) -> bool:
    core = token.rstrip("/")
    return (core.count("/") >= 2 or token.startswith(("~/", "./", "../")) or "\\" in token
            or "." in core.rsplit("/", 1)[-1])


class _Token:
    """One token of a capitalised run, with what the run's rules need to know about it."""

    __slots__ = ("end", "kind", "start", "stop")

    def __init__(self, start: int, end: int, kind: str, stop: bool) -> None:
        self.start, self.end, self.kind, self.stop = start, end, kind, stop


def _run(field: TextField, offset: int, run: str) -> Iterator[Mention]:
    """The names in one capitalised run: split at "and" without an "of" before it, at a cut
    word ("Alzheimer-related", "England's"), and into pieces of at most 8 tokens."""
    if " " not in run and "\t" not in run:  # most runs are one word: no splitting to do
        kind, cut = _classify(run)
        yield from _names(field, [_Token(offset, offset + cut, kind, _is_stop(run[:cut]))])
        return
    tokens: list[_Token] = []
    for m in _TOKEN.finditer(run):
        tok, start = m.group(), offset + m.start()
        kind, cut = _classify(tok)
        if kind == "conn" and tok in lexicon.AND_CONNECTORS and not any(
                field.text[t.start:t.end] in lexicon.AND_ENABLERS for t in tokens):
            yield from _names(field, tokens)
            tokens = []
            continue
        if kind != "conn" and _is_stop(tok[:cut]):
            # A capitalised function word inside a run separates two names
            # ("IMPORTANCE The 2008 Physical Activity Guidelines").
            yield from _names(field, tokens)
            tokens = []
            continue
        if cut < len(tok):
            tokens.append(_Token(start, start + cut, kind, _is_stop(tok[:cut])))
            yield from _names(field, tokens)
            tokens = []
            continue
        tokens.append(_Token(start, start + len(tok), kind, kind != "conn" and _is_stop(tok)))
    yield from _names(field, tokens)


def _classify(tok: str) -> tuple[str, int]:
    """(kind, how many characters of `tok` belong to the run); remembered, as a text repeats
    its names ("GH", "IGF1" ten times in one abstract)."""
    known = _CLASSIFIED.get(tok)
    if known is None:
        if len(_CLASSIFIED) >= _CLASSIFIED_MAX:
            _CLASSIFIED.clear()
        known = _CLASSIFIED[tok] = _classify_new(tok)
    return known


_CLASSIFIED: dict[str, tuple[str, int]] = {}
_CLASSIFIED_MAX = 100_000


def _classify_new(tok: str) -> tuple[str, int]:
    if tok[0].isdigit():
        return "num", len(tok)
    if tok[0].islower() or tok == "&":
        return "conn", len(tok)
    if tok.endswith(("'s", "\u2019s")) and len(tok) > 2:
        return _classify_new(tok[:-2])[0], len(tok) - 2
    hyphen = _HYPHEN_LOWER.search(tok)
    if hyphen and hyphen.start() > 0 and not _ACRONYM.fullmatch(tok):
        return _classify_new(tok[:hyphen.start()])[0], hyphen.start()
    if tok.endswith(".") and not _ACRONYM.fullmatch(tok):
        word = tok[:-1].lower()
        if word in lexicon.TITLES:
            return "title", len(tok)
        return ("initial" if len(word) == 1 else "abbrev"), len(tok)
    if _ACRONYM.fullmatch(tok) and sum(ch.isupper() for ch in tok) >= 2:
        return "acronym", len(tok)
    if "_" in tok or "." in tok or "::" in tok or _CAMEL.search(tok):
        return "ident", len(tok)
    return "word", len(tok)


def _is_stop(tok: str) -> bool:
    return tok.lower() in lexicon.STOP_WORDS


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
        yield _mention(field, first.start, tokens[hi - 1].end, "NAME")
        return
    text = field.text[first.start:first.end]
    if first.kind == "acronym":
        if not lexicon.ROMAN.fullmatch(text):
            yield _mention(field, first.start, first.end, "ACRONYM")
    elif first.kind == "ident":
        yield _mention(field, first.start, first.end, "IDENTIFIER")
    elif first.kind in ("word", "abbrev") and len(text) > 1 and not (
            _sentence_start(field.text, tokens[0].start) and _used_lower(field.text, text)):
        yield _mention(field, first.start, first.end, "NAME")


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
    start = text.find(lower)
    while start >= 0:
        end = start + len(lower)
        if (start == 0 or not text[start - 1].isalnum()) and (
                end == len(text) or not text[end].isalnum()):
            return True
        start = text.find(lower, end)
    return False


def _quoted(field: TextField) -> Iterator[Mention]:
    for match in _QUOTED.finditer(field.text):
        inner = match.group(match.lastgroup or "a")
        name = inner.strip(" \t,.;:")
        words = name.split()
        if len(name) < 2 or len(words) > MAX_QUOTED_TOKENS or not any(
                ch.isalnum() for ch in name):
            continue
        if all(w.strip(_WORD_EDGES).lower() in lexicon.STOP_WORDS for w in words):
            continue
        yield _mention(field, match.start(), match.end(), "QUOTED", name=name)

