"""Evidence snippets: an excerpt of a part around the words that matched the query."""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+", re.UNICODE)


def query_terms(query: str) -> list[str]:
    """Lower-cased words of the query, longest first (so the most specific match wins)."""
    words = {w.lower() for w in _WORD.findall(query) if len(w) > 1}
    return sorted(words, key=lambda w: (-len(w), w))


def _stem_prefix(word: str) -> str:
    # A cheap stand-in for stemming: "warehouses" should find "warehouse", "running" "run".
    return word[: max(4, len(word) - 3)] if len(word) > 5 else word


def snippet(text: str | None, query: str, *, width: int = 240) -> str:
    """About `width` characters of `text` centred on the first query word found in it, cut at
    word boundaries, with an ellipsis where text was cut; the start of the text if none matches.
    """
    if not text:
        return ""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    lowered = flat.lower()
    start = None
    for term in query_terms(query):
        match = re.search(r"\b" + re.escape(_stem_prefix(term)), lowered)
        if match is not None:
            start = match.start()
            break
    if start is None:
        return _cut(flat, 0, width)
    begin = max(0, start - width // 3)
    return _cut(flat, begin, width)


def _cut(text: str, begin: int, width: int) -> str:
    end = min(len(text), begin + width)
    if begin > 0:
        space = text.find(" ", begin)
        begin = space + 1 if 0 <= space < begin + 30 else begin
    if end < len(text):
        space = text.rfind(" ", begin, end)
        end = space if space > begin + width // 2 else end
    excerpt = text[begin:end].strip()
    return ("…" if begin > 0 else "") + excerpt + ("…" if end < len(text) else "")
