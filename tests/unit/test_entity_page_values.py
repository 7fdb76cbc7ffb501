"""The entity pages' pure values: a snippet always shows its span where it says, and a cursor
gives back the key it was made of, while anything else is refused naming `cursor`."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from hypothesis import given, strategies as st

from pipeline.domain.errors import InvalidInput
from pipeline.entities.pages import SNIPPET_CONTEXT, decode_cursor, encode_cursor, snippet

MENTION_KEY = (uuid.UUID, uuid.UUID, str, int, int)


@given(st.text(alphabet=st.sampled_from("ab \n."), min_size=1, max_size=400), st.data())
def test_a_snippet_shows_its_span(field: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(field) - 1))
    end = data.draw(st.integers(start + 1, len(field)))
    lo = max(start - SNIPPET_CONTEXT, 0)
    window = field[lo:end + SNIPPET_CONTEXT]  # what the store cuts (substr)
    s = snippet(window, lo, len(field), start, end)
    assert s.text[s.start:s.end] == field[start:end].translate(str.maketrans("\n", " "))
    assert len(s.text) <= end - start + 2 * SNIPPET_CONTEXT + 2


@given(st.floats(0, 1), st.uuids(), st.uuids())
def test_a_cursor_gives_back_its_key(confidence: float, a: uuid.UUID, b: uuid.UUID) -> None:
    key = (confidence, a, b)
    assert decode_cursor(encode_cursor(key), (float, uuid.UUID, uuid.UUID)) == key


def _raw(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


@pytest.mark.parametrize("cursor", [
    "", "!!", _raw({}), _raw([1, 2]), _raw([str(uuid.uuid4()), 7, "title", 0, 1]),
    _raw([str(uuid.uuid4()), str(uuid.uuid4()), "title", 2**40, 1]),
    _raw([str(uuid.uuid4()), str(uuid.uuid4()), "title", True, 1]),
    _raw([str(uuid.uuid4()), str(uuid.uuid4()), "ti\u0000", 0, 1]),
])
def test_anything_else_is_refused_naming_the_cursor(cursor: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        decode_cursor(cursor, MENTION_KEY)
    assert refused.value.field == "cursor"
