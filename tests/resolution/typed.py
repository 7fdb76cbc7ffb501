"""A small typed extractor for the resolution tests: a capitalised word followed by "the player"
is a PERSON, by "the country" a GPE; in double quotes it is QUOTED (a shape label: untyped);
otherwise NAME. Enough to write homonyms with a rule a test can compute by hand."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pipeline.domain.mentions import Extraction, Mention, TextField

_WORD = re.compile(r'"([A-Z]\w+)"|\b([A-Z]\w+)(?= the (player|country))'
                   r"|\b([A-ZŁ]\w+(?: [A-ZŁ]\w+)*)")
_TYPES = {"player": "PERSON", "country": "GPE"}


class TypedExtractor:
    name = "test-typed"

    def extract(self, rows: Sequence[Sequence[TextField]]) -> list[Extraction]:
        return [Extraction([_mention(f, m) for f in row for m in _WORD.finditer(f.text)])
                for row in rows]


def _mention(f: TextField, m: re.Match[str]) -> Mention:
    if m.group(1):
        return Mention(name=m.group(1), label="QUOTED", field=f.field, start=m.start(),
                       end=m.end(), text=m.group(0))
    if m.group(2):
        return Mention(name=m.group(2), label=_TYPES[m.group(3)], field=f.field,
                       start=m.start(), end=m.end(), text=m.group(2))
    return Mention(name=m.group(4), label="NAME", field=f.field, start=m.start(), end=m.end(),
                   text=m.group(4))
