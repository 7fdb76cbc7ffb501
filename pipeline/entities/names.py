"""Entity names: one normalisation for every layer that compares them.

The extractor, the extraction stage (which entity a mention names), the resolver (exact, alias,
fold and segment layers) and PPR's seed matching all compare names through these functions, so a
name found by one is found by all.

- `normalise`: NFKC, case-folded, inner whitespace collapsed, surrounding punctuation stripped,
  a leading English article dropped ("The Beatles" -> "beatles"). Accents are kept: "Müller" and
  "Muller" are different keys here; `fold` is the layer that ignores them.
- `fold`: `normalise`, then accents removed, the Latin letters that do not decompose spelled in
  ASCII ("ł" -> "l", "ø" -> "o", "æ" -> "ae", "þ" -> "th"; "ß" is already "ss" by case-folding),
  and every run of anything but letters (any script: "Москва" stays "москва") and ASCII digits a
  single space. Migration 0021's SQL `brainstream_name_fold` computes the same from `normalise`'s
  output (same decomposition, the same mark range, the same letter table): a property test on
  the real Postgres compares them (tests/resolution/test_fold_sql.py).
- `segments`: the pieces of an identifier ("parseHttpRequest", "parse_http_request",
  "pkg.mod.Class", "src/api/app.py"), lower-cased.
- `numbers`: the digit runs of a name: two names whose numbers differ are never the same entity
  ("Amendment 16" vs "Amendment 17", "Python 3.11" vs "Python 3.12").
"""

from __future__ import annotations

import re
import unicodedata

_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = "\"'`()[]{}<>.,;:!?\u201c\u201d\u2018\u2019\u00ab\u00bb"
_ARTICLE = re.compile(r"^(the|a|an)\s+(?=\S)")
# What `fold` removes after the NFKD decomposition: the Combining Diacritical Marks block (the
# accents of Latin, Greek and Cyrillic letters: "é" -> "e", "й" -> "и"). Other marks
# recompose with their letter ("ば" stays); one that cannot is a separator.
_DIACRITICS = re.compile("[\u0300-\u036f]+")
# Latin-1 Supplement and Latin Extended-A/B letters that have no decomposition, as unaccent's
# rules spell them (lower case: the input is case-folded). The SQL side of migration 0021 holds
# the same two strings and the same replacements: change them together.
LATIN_FROM = "ðøđħıĸłŋŧƀƃƈƌƒƙƚƞƥƫƭƴƶǥȡȥȴȵȶȷȼȿɀɇɉɍɏ"
LATIN_TO = "dodhiqlntbbcdfklnpttyzgdzlntjcszejry"
LATIN_MULTI = {"æ": "ae", "þ": "th", "œ": "oe", "ƕ": "hv", "ƣ": "oi", "ȸ": "db", "ȹ": "qp"}
_LATIN = str.maketrans({**dict(zip(LATIN_FROM, LATIN_TO, strict=True)), **LATIN_MULTI})
_DIGITS = re.compile(r"\d+")
# Identifier boundaries: separators, and case changes inside a word (HTTPServer -> HTTP Server).
_SEPARATORS = re.compile(r"[\s_./\\:\-#]+")
_RUNS = re.compile(r"[^\W\d_]+|\d+")


def normalise(name: str) -> str:
    """The key an entity is stored under within its namespace."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = _SPACE.sub(" ", text).strip().strip(_EDGE_PUNCT).strip()
    return _ARTICLE.sub("", text)


def fold(name: str) -> str:
    """`normalise` without accents and punctuation: the resolver's fold layer compares these."""
    plain = _DIACRITICS.sub("", unicodedata.normalize("NFKD", normalise(name))).translate(_LATIN)
    # recomposed: a mark outside the diacritics block joins its letter again ("ば")
    plain = unicodedata.normalize("NFC", plain)
    return " ".join("".join(ch if _is_word(ch) else " " for ch in plain).split())


def _is_word(ch: str) -> bool:
    """A letter of any script, or an ASCII digit: what `fold` keeps."""
    return ch.isalpha() or "0" <= ch <= "9"


def segments(identifier: str) -> list[str]:
    """The lower-cased pieces of an identifier, in order; a plain word is its own one piece."""
    out: list[str] = []
    for piece in _SEPARATORS.split(identifier):
        for run in _RUNS.findall(piece):
            out.extend(part.lower() for part in _camel(run))
    return out


def _camel(run: str) -> list[str]:
    """Split a run of letters at its case changes: "HTTPServer" -> HTTP, Server; "parseHttp" ->
    parse, Http (any script with case, not only ASCII)."""
    if run.isdigit():
        return [run]
    parts: list[str] = []
    start = 0
    for i in range(1, len(run)):
        prev, cur = run[i - 1], run[i]
        nxt = run[i + 1] if i + 1 < len(run) else ""
        if (prev.islower() and cur.isupper()) or (
                prev.isupper() and cur.isupper() and nxt.islower()):
            parts.append(run[start:i])
            start = i
    parts.append(run[start:])
    return parts


def numbers(name: str) -> tuple[str, ...]:
    """The digit runs of `name`, leading zeros dropped ("Apollo 011" and "Apollo 11" agree)."""
    return tuple(run.lstrip("0") or "0" for run in _DIGITS.findall(unicodedata.normalize(
        "NFKC", name)))
