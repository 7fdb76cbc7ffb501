"""Entity names: one normalisation for every layer that compares them.

The extractor, the extraction stage (which entity a mention names), the resolver (exact, alias,
fold and segment layers) and PPR's seed matching all compare names through these functions, so a
name found by one is found by all.

- `normalise`: NFKC, case-folded, inner whitespace collapsed, surrounding punctuation stripped,
  a leading English article dropped ("The Beatles" -> "beatles"). Accents are kept: "Müller" and
  "Muller" are different keys here; `fold` is the layer that ignores them.
- `fold`: `normalise`, then accents removed and every non-alphanumeric run a single space.
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
_NON_ALNUM = re.compile(r"[^0-9a-z]+")
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
    decomposed = unicodedata.normalize("NFKD", normalise(name))
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _NON_ALNUM.sub(" ", plain).strip()


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
