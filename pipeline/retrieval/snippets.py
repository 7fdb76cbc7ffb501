"""Evidence snippets: an excerpt of a part around the words that matched the query, and where
in the excerpt those words are (`highlights`: `[start, end)` character offsets, so a client can
mark them without matching words itself).

The cost is bounded whatever the query: at most `max_terms` query words (the longest) make one
compiled alternation per request, and each part is scanned once with it. Callers build snippets
for the page they return only (`ResultPager.materialize`), off the event loop.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+", re.UNICODE)

# Default of the setting `api_snippet_max_terms`.
MAX_SNIPPET_TERMS = 32


def query_terms(query: str) -> list[str]:
    """Lower-cased words of the query, longest first (so the most specific match wins)."""
    words = {w.lower() for w in _WORD.findall(query) if len(w) > 1}
    return sorted(words, key=lambda w: (-len(w), w))


def _stem_prefix(word: str) -> str:
    # A cheap stand-in for stemming: "warehouses" should find "warehouse", "running" "run".
    return word[: max(4, len(word) - 3)] if len(word) > 5 else word


class Snippets:
    """Snippets for one query: its `max_terms` longest words, as one compiled pattern."""

    def __init__(self, query: str, *, width: int = 240,
                 max_terms: int = MAX_SNIPPET_TERMS) -> None:
        self.width = width
        stems = dict.fromkeys(_stem_prefix(t) for t in query_terms(query)[:max(0, max_terms)])
        # Longest first: at one position the alternation takes the most specific word.
        ordered = sorted(stems, key=lambda s: (-len(s), s))
        self.terms = tuple(ordered)
        self.pattern = (re.compile(r"\b(?:" + "|".join(map(re.escape, ordered)) + ")")
                        if ordered else None)
        # A highlight covers the whole word a stem begins ("warehouses" for "warehouse"); it
        # matches the snippet as written (case-insensitively), so offsets are the snippet's
        # own even where lower-casing would change a string's length.
        self.words = (re.compile(r"\b(?:" + "|".join(map(re.escape, ordered)) + r")\w*",
                                 re.IGNORECASE) if ordered else None)

    def __call__(self, text: str | None) -> str:
        """About `width` characters of `text` centred on the first query word in it, cut at
        word boundaries, with an ellipsis where text was cut; the start of the text if none
        matches."""
        if not text:
            return ""
        flat = " ".join(text.split())
        if len(flat) <= self.width:
            return flat
        match = self.pattern.search(flat.lower()) if self.pattern is not None else None
        if match is None:
            return _cut(flat, 0, self.width)
        return _cut(flat, max(0, match.start() - self.width // 3), self.width)


    def highlights(self, excerpt: str) -> list[list[int]]:
        """`[start, end)` offsets into `excerpt` of each query word in it, in order."""
        if self.words is None:
            return []
        return [[m.start(), m.end()] for m in self.words.finditer(excerpt)]


def snippet(text: str | None, query: str, *, width: int = 240) -> str:
    """One snippet of `text` for `query` (see `Snippets`)."""
    return Snippets(query, width=width)(text)


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
