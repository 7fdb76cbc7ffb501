"""Spans shared by the extractors: overlap resolution, the per-row cap, locating a named text.

Every extractor answers mentions whose span satisfies `field_text[start:end] == text`; these
functions keep that true whatever the source of a candidate (a rule, a model, an LLM's answer).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence

from pipeline.domain.mentions import Mention, TextField


def longest_first(candidates: Iterable[Mention], fields: Sequence[TextField],
                  limit: int) -> list[Mention]:
    """The non-overlapping mentions among `candidates`, at most `limit`: a longer span beats
    the shorter ones it overlaps (at equal length the earlier wins), so "Bank of England"
    hides "England". Answered in field order, then by position; the cap keeps the first."""
    order = {f.field: i for i, f in enumerate(fields)}
    taken: dict[str, tuple[list[int], list[int]]] = {}
    kept: list[Mention] = []
    for m in sorted(candidates, key=lambda m: (m.start - m.end, order.get(m.field, 0), m.start)):
        starts, ends = taken.setdefault(m.field, ([], []))
        i = bisect.bisect_left(starts, m.start)
        # Accepted spans never overlap, so only the neighbours on either side can collide.
        if i > 0 and ends[i - 1] > m.start:
            continue
        if i < len(starts) and starts[i] < m.end:
            continue
        starts.insert(i, m.start)
        ends.insert(i, m.end)
        kept.append(m)
    kept.sort(key=lambda m: (order.get(m.field, 0), m.start))
    return kept[:limit]


def occurrences(text: str, needle: str) -> list[int]:
    """Start offsets of `needle` in `text`, not overlapping: exact matches, else matches that
    differ only in case; a needle that begins or ends with a word character only matches
    where a word begins or ends ("AI" is not found inside "said")."""
    if not needle:
        return []
    lead = r"(?<!\w)" if _WORD_CHAR.match(needle[0]) else ""
    tail = r"(?!\w)" if _WORD_CHAR.match(needle[-1]) else ""
    body = re.escape(needle)
    found = [m.start() for m in re.finditer(lead + body + tail, text)]
    if found:
        return found
    # re's case-insensitive match compares character by character: the span keeps its length.
    return [m.start() for m in re.finditer(lead + body + tail, text, re.IGNORECASE)]


_WORD_CHAR = re.compile(r"\w")
