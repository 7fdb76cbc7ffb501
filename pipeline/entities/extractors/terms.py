"""The identifier and quoted-term rules, shared by the heuristic and spaCy extractors.

- identifiers: CamelCase, snake_case, dotted names, paths, `::` names, URLs: the whole token is
  the name, its segments joined by spaces an alias (IDENTIFIER); an acronym found this way
  ("mRNA") is an ACRONYM;
- quoted terms of up to 8 tokens in straight or curly quotes: the span keeps the quotes, the
  name does not (QUOTED).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from pipeline.domain.mentions import Mention, TextField
from pipeline.entities.extractors import lexicon
from pipeline.entities.extractors.spans import mention

MAX_QUOTED_TOKENS = 8

# Where an identifier shows: an underscore, a slash, "::", a dot next to a letter (not the
# decimal point of "0.05", the most common dot inside a word), a camel hump. The token around
# the hit is then read whole. The pattern opens with one character class, so `re` skips the
# rest of the text in C.
_IDENT_HIT = re.compile(
    r"[_/\\:.A-Z](?:(?<=[_/\\])|(?<=\.)(?=[^\W\d_])|(?<=[^\W\d_]\.)(?=\w)|(?<=:)(?=:)"
    r"|(?<=[a-z0-9][A-Z]))")
_IDENT_BODY = re.compile(r"[\w$~./\\:-]*")
_IDENT_CHARS = frozenset("_$~./\\:-")
# The opening quote comes first, as a class, for the same reason; a straight single quote
# counts only outside a word (not the apostrophe of "don't").
_QUOTED = re.compile(
    r"""["“«\u2018'](?:(?<=")(?P<a>[^"\n]{1,200})"|(?<=“)(?P<b>[^”\n]{1,200})”"""
    r"""|(?<=«)(?P<c>[^»\n]{1,200})»|(?<=\u2018)(?P<d>[^\u2019\n]{1,200})\u2019"""
    r"""|(?<![\w]')(?<=')(?P<e>[^'\n]{1,200})'(?![\w]))"""
)
_QUOTES = ('"', "“", "«", "\u2018", "'")
_IDENT_SHAPE = re.compile(r"_|[a-z0-9][A-Z]|[A-Z]{2}[a-z]|(?:[./\\]|::)\w|://")
_LOWER_SUFFIX = re.compile(r"(?:-[a-z]+)+$")
_IDENT_TRAILING = ".,;:!?)]}\"'”\u2019»/"
_WORD_EDGES = ".,;:!?()"


def identifier_and_quoted(field: TextField) -> list[Mention]:
    """The identifier and quoted-term candidates of one field (the spaCy extractor adds these
    to its model's entities)."""
    out = list(_identifiers(field))
    if any(q in field.text for q in _QUOTES):
        out.extend(_quoted(field))
    return out


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


def _identifier(field: TextField, start: int, token: str) -> Mention | None:
    token = _LOWER_SUFFIX.sub("", token.rstrip(_IDENT_TRAILING))  # "ConA-induced" -> "ConA"
    if not token:
        return None
    if "/" in token and "://" not in token and not _is_path(token):
        return None  # "and/or", "mg/kg", "TCP/IP": a slash between two words is not a path
    if not any(ch.isalpha() for ch in token) or not _IDENT_SHAPE.search(token):
        return None
    if lexicon.ACRONYM.fullmatch(token) and sum(ch.isupper() for ch in token) >= 2:
        return mention(field, start, start + len(token), "ACRONYM")  # "mRNA", "siRNA"
    if "." in token and "/" not in token and "_" not in token and not lexicon.CAMEL.search(token):
        pieces = token.split(".")
        if all(len(p) <= 1 for p in pieces) or all(p.isdigit() for p in pieces if p):
            return None  # "e.g", "i.e", version-like digit runs
    return mention(field, start, start + len(token), "IDENTIFIER")


def _is_path(token: str) -> bool:
    core = token.rstrip("/")
    return (core.count("/") >= 2 or token.startswith(("~/", "./", "../")) or "\\" in token
            or "." in core.rsplit("/", 1)[-1])



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
        yield mention(field, match.start(), match.end(), "QUOTED", name=name)

