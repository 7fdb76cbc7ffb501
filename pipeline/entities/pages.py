"""What the entity pages and the curator's queue show, as pure values: a short snippet around a
mention's span, and the keyset cursors the two lists page by (opaque to callers, stable under
writes: a page starts after the last key the previous one showed, never at an offset).

The reads themselves are `pipeline/entities/store/pages.py`; the API, the CLI and MCP shape
them (`api/routes/entity_pages.py`).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.domain.errors import InvalidInput

# Characters of context either side of a span: a sentence's worth, enough to tell two senses of
# a name apart in a list of mentions.
SNIPPET_CONTEXT = 80
ELLIPSIS = "…"
_FLAT = str.maketrans("\r\n\t", "   ")


@dataclass(frozen=True)
class Snippet:
    """Text around a span, and where the span lies in it ([start, end) of `text`)."""

    text: str
    start: int
    end: int


def snippet(window: str, window_start: int, field_length: int, start: int, end: int) -> Snippet:
    """The snippet of the span [start, end) given `window`, the field's text from
    `window_start` (as the store cut it: SNIPPET_CONTEXT either side), cut at word boundaries
    and marked with an ellipsis where the field goes on."""
    lo, hi = start - window_start, end - window_start
    left, right = 0, len(window)
    if window_start > 0:  # the field goes on before: drop the broken first word
        space = window.find(" ", 0, lo)
        left = space + 1 if space >= 0 else 0
    if window_start + len(window) < field_length:  # and after: drop the broken last word
        space = window.rfind(" ", hi)
        right = space if space >= 0 else len(window)
    head = ELLIPSIS if window_start + left > 0 else ""
    tail = ELLIPSIS if window_start + right < field_length else ""
    # line breaks as spaces (one character each: the span's offsets hold)
    text = head + window[left:right].translate(_FLAT) + tail
    return Snippet(text, len(head) + lo - left, len(head) + hi - left)


def encode_cursor(key: Sequence[Any]) -> str:
    """An opaque cursor for the key of the last item shown."""
    raw = json.dumps([str(k) if isinstance(k, uuid.UUID) else k for k in key],
                     separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


# What a key's numbers may be: span offsets and confidences (a number past these would be
# refused by Postgres' int and real, as a 500, not named as a bad cursor).
_INT_RANGE = range(0, 2**31)
_FLOAT_BOUND = 1e6


def decode_cursor(cursor: str, kinds: Sequence[type]) -> tuple[Any, ...]:
    """The key a cursor carries, each part of the type `kinds` names (uuid.UUID, int, str,
    float); `InvalidInput` on `cursor` for anything this module did not write."""
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(raw, list) or len(raw) != len(kinds):
            raise ValueError("wrong shape")
        out: list[Any] = []
        for value, kind in zip(raw, kinds, strict=True):
            if kind is uuid.UUID:
                if not isinstance(value, str):
                    raise ValueError("not a uuid")
                out.append(uuid.UUID(value))
            elif kind is float:
                if not isinstance(value, (int, float)) or isinstance(value, bool) \
                        or not abs(value) <= _FLOAT_BOUND:
                    raise ValueError("not a confidence")
                out.append(float(value))
            elif not isinstance(value, kind) or isinstance(value, bool):
                raise ValueError("wrong type")
            elif kind is int and value not in _INT_RANGE:
                raise ValueError("not an offset")
            elif isinstance(value, str) and "\x00" in value:
                raise ValueError("not a field")
            else:
                out.append(value)
    except (ValueError, TypeError) as exc:
        raise InvalidInput("not a cursor of this list", field="cursor") from exc
    return tuple(out)
