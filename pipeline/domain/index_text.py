"""The text that is embedded (and hashed) for an object or a part.

The hash of this text decides whether an object needs re-embedding, so the rendering must be
deterministic: properties are sorted, numbers and booleans have one spelling.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

# Cutting content at the last whitespace is only worth it when that loses little text.
_WORD_CUT_SLACK = 0.2
# How much of a parent's content its own index text (and vector) carries: the parts carry all of
# it, so the parent's text is its title, summary and properties with the content's opening. A
# change re-embeds every parent: a rebuild, not a setting.
CONTENT_CAP_CHARS = 2000


def _scalar_text(value: object) -> str | None:
    if isinstance(value, bool):  # before int: bool is an int subclass
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return value.strip() or None
    return None


def _property_text(value: object) -> str | None:
    if isinstance(value, list):
        items = [t for t in (_scalar_text(v) for v in value) if t is not None]
        return ", ".join(items) if items else None
    return _scalar_text(value)


def _cap(text: str, cap: int) -> str:
    if len(text) <= cap:
        return text
    cut = text[:cap]
    space = max(cut.rfind(" "), cut.rfind("\n"), cut.rfind("\t"))
    if space >= cap * (1 - _WORD_CUT_SLACK):
        cut = cut[:space]  # don't end the embedded text on half a word
    return cut.rstrip()


def entity_index_text(
    title: str | None,
    summary: str | None,
    properties: Mapping[str, object] | None,
    content: str | None,
    *,
    content_cap_chars: int = CONTENT_CAP_CHARS,
) -> str:
    """Index text of a first-class object: title, summary, sorted scalar properties as
    `key: value` lines (lists joined with ", "; nested values skipped), then capped content."""
    lines: list[str] = []
    for part in (title, summary):
        if part and part.strip():
            lines.append(part.strip())
    for key in sorted(properties or {}):
        rendered = _property_text((properties or {})[key])
        if rendered is not None:
            lines.append(f"{key}: {rendered}")
    if content and content.strip() and content_cap_chars > 0:
        capped = _cap(content.strip(), content_cap_chars)
        if capped:
            lines.append(capped)
    return "\n".join(lines)


def part_index_text(parent_title: str | None, part_text: str) -> str:
    """Index text of a part: its parent's title (for context) followed by the part's text."""
    title = (parent_title or "").strip()
    body = part_text.strip()
    return f"{title}\n{body}" if title and body else title or body


def embedder_text(index_text: str, *, cap_chars: int) -> str:
    """The part of an index text that reaches the embedder: at most `cap_chars` characters (cut
    at a word boundary when that loses little). Content is capped in the index text already, but
    title, summary and properties are not: without this an object with a huge title or many
    properties sends a text the embedder refuses or silently truncates. The hash stays on the
    whole index text, so an edit past the cap re-embeds (to the same vector): harmless."""
    return _cap(index_text, cap_chars)


def text_hash(text: str) -> str:
    """SHA-256 hex digest of the UTF-8 index text; equal hashes mean "no need to re-embed"."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
