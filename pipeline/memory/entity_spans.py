"""A simple entity extractor behind the `Extractor` port, for message content until the entity
layer's extractor (`pipeline.entities.extractors.build_extractor`) is wired in its place (one line
in `pipeline/memory_services/extraction.py: message_extractor`).

A mention is a run of capitalised words ("Caroline", "LGBTQ support group" is not one, "New York
City" is), names compared through `pipeline/entities/names.py`. A lone capitalised word that
is a common word ("Hey", "The", "Thanks") is not a name, nor is one that leads a run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pipeline.domain.mentions import Extraction, Mention, TextField
from pipeline.entities.names import normalise
from pipeline.memory.summary_text import content_words

# A capitalised word (any script with case), optionally with an inner apostrophe or hyphen;
# runs of them separated by single spaces form one name.
_NAME_RE = re.compile(r"(?<![\w'])[^\W\d_a-z][\w'-]*(?: [^\W\d_a-z][\w'-]*)*")
_WORD_RE = re.compile(r"\S+")
_POSSESSIVE_RE = re.compile(r"['\u2019]s?$|[-']+$")
LABEL = "name"


class CapitalisedSpanExtractor:
    """Capitalised runs as mentions, with their character spans in the field."""

    name = "capitalised"

    def extract(self, rows: Sequence[Sequence[TextField]]) -> list[Extraction]:
        """One `Extraction` per row; spans index the field (`text == field[start:end]`)."""
        return [Extraction(mentions=[m for f in row for m in self._mentions(f)]) for row in rows]

    def _mentions(self, field: TextField) -> list[Mention]:
        out: list[Mention] = []
        for match in _NAME_RE.finditer(field.text):
            words = [(w.start(), w.end()) for w in _WORD_RE.finditer(match.group(0))]
            # Leading function or chatter words are not part of the name ("Hey Mel", "The
            # Beatles" -> "Mel", "Beatles"), and a possessive is not either ("Mel's").
            while words and not content_words(match.group(0)[words[0][0]:words[0][1]]):
                words.pop(0)
            if not words:
                continue
            start = match.start() + words[0][0]
            end = match.start() + words[-1][1]
            text = _POSSESSIVE_RE.sub("", field.text[start:end])
            end = start + len(text)
            if len(text) < 2:
                continue
            out.append(Mention(normalise(text), LABEL, field.field, start, end, text))
        return out
