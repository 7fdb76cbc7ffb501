"""Who said a message, and which speakers a query names.

A message's speaker is the name in its metadata (`speaker`, else `name`: chat apps keep the
person there) or else its role (`user`, `assistant`...), in lower case; the store applies the
same rule in SQL (`pipeline/memory/store/search.py: _SPEAKER`). A query names a speaker when it
holds the speaker's whole name as words, or its first word ("Caroline" for "Caroline Smith"), in
any case, a possessive included ("Caroline's").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# A first name shorter than this is too likely an ordinary word ("Al", "Jo") to name anyone.
_MIN_FIRST_NAME = 3
# Roles that are ordinary words of a query too ("the user table"): named, they still get their
# channels, but stay in the text.
_ROLE_WORDS = frozenset({"user", "assistant", "system", "tool", "human", "ai", "bot", "agent"})


def speaker_of(role: str | None, metadata: Mapping[str, Any]) -> str | None:
    """The speaker of a message, lower case (`None` without a role or a name)."""
    for key in ("speaker", "name"):
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value.lower()
    return role.lower() if role else None


def _pattern(speaker: str) -> re.Pattern[str]:
    """The speaker's whole name or first word, as words, a possessive included."""
    parts = speaker.split()
    forms = sorted({speaker.strip(), *(parts[:1] if parts and len(parts[0]) >= _MIN_FIRST_NAME
                                       else [])}, key=len, reverse=True)
    alternatives = "|".join(re.escape(f) for f in forms if f)
    return re.compile(rf"(?<!\w)(?:{alternatives})(?:['\u2019]s)?(?!\w)", re.IGNORECASE)


def named_speakers(query: str, speakers: Iterable[str]) -> tuple[str, ...]:
    """The speakers (lower case, as `speaker_of` gives them) that `query` names, sorted."""
    return tuple(sorted(s for s in speakers if s.strip() and _pattern(s).search(query)))


def without_speakers(query: str, speakers: Iterable[str]) -> str:
    """`query` without the names of `speakers` (the query itself if nothing else is left; roles
    that are ordinary words stay): in a conversation a name is mostly said to its bearer, so it
    finds the other speaker's turns."""
    out = query
    for speaker in speakers:
        if speaker not in _ROLE_WORDS:
            out = _pattern(speaker).sub(" ", out)
    out = re.sub(r"\s+", " ", out).strip()
    return out if re.search(r"\w", out) else query
