"""An object put's supplied entities and relations: what parse refuses (`structure_invalid`,
naming the field) and how spans fall on the parts the content is cut into."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from pipeline.domain.chunking import chunk_text
from pipeline.domain.errors import InvalidPayload, StructureInvalid
from pipeline.domain.structure import split_structure
from schemas.events import parse_event
from schemas.payloads import ObjectPut

NS = uuid.UUID("11111111-1111-4111-8111-111111111111")


def event(data: dict[str, Any]) -> bytes:
    return json.dumps({"specversion": "1.0", "id": "e1", "source": "crm",
                       "type": "brainstream.object.put", "namespace": str(NS),
                       "data": {"kind": "company", **data}}).encode()


ACME = {"title": "Acme Corp", "content": "Jane Roe runs Acme.",
        "entities": [{"name": "Acme Corp", "label": "ORG",
                      "spans": [{"field": "title", "start": 0, "end": 9},
                                {"field": "content", "start": 14, "end": 18}]},
                     {"name": "Jane Roe", "label": "PERSON",
                      "spans": [{"field": "content", "start": 0, "end": 8}]}],
        "relations": [{"subject": "Jane Roe", "predicate": "ceo_of", "object": "Acme Corp",
                       "valid_from": "2020-01-01T00:00:00Z"}]}


def test_a_valid_put_parses() -> None:
    payload = parse_event(event(ACME)).payload
    assert isinstance(payload, ObjectPut) and payload.entities and payload.relations


@pytest.mark.parametrize(("change", "field"), [
    ({"entities": [{**ACME["entities"][0], "spans": [{"field": "title", "start": 3,
                                                      "end": 40}]}, ACME["entities"][1]]},
     "data.entities[0].spans[0].end"),
    ({"entities": [{**ACME["entities"][0], "spans": [{"field": "summary", "start": 0,
                                                      "end": 2}]}, ACME["entities"][1]]},
     "data.entities[0].spans[0].field"),
    ({"entities": [ACME["entities"][0], {**ACME["entities"][1], "name": "Acme Corp"}]},
     "data.entities[1].name"),
    ({"relations": [{**ACME["relations"][0], "object": "Globex"}]}, "data.relations[0].object"),
    ({"relations": [{**ACME["relations"][0], "object": "Jane Roe"}]},
     "data.relations[0].object"),
    ({"relations": [{**ACME["relations"][0], "valid_to": "2019-01-01T00:00:00Z"}]},
     "data.relations[0].valid_to"),
    ({"relations": [{**ACME["relations"][0], "span": {"field": "content", "start": 8,
                                                       "end": 9}}]},
     "data.relations[0].span.start"),  # a blank span
])
def test_structure_that_does_not_fit_the_put_is_refused(change: dict[str, Any],
                                                         field: str) -> None:
    raw = event({**ACME, **change})
    with pytest.raises(StructureInvalid) as refused:
        parse_event(raw)
    assert refused.value.code == "structure_invalid" and refused.value.field == field


def test_shape_and_bounds_are_the_payload_model() -> None:
    with pytest.raises(InvalidPayload) as naive:
        parse_event(event({**ACME, "relations": [{**ACME["relations"][0],
                                                  "valid_from": "2020-01-01T00:00:00"}]}))
    assert naive.value.field == "data.relations[0].valid_from"
    many = [{"name": f"n{i}", "spans": [{"field": "title", "start": 0, "end": 4}]}
            for i in range(501)]
    with pytest.raises(InvalidPayload) as too_many:
        parse_event(event({**ACME, "entities": many, "relations": []}))
    assert too_many.value.field == "data.entities"


def test_a_part_put_names_spans_of_its_content_only() -> None:
    parent = str(uuid.uuid4())
    raw = event({"parent_id": parent, "position": 0, "title": "x", "content": "Jane Roe",
                 "entities": [{"name": "Jane", "spans": [{"field": "title", "start": 0,
                                                          "end": 1}]}]})
    with pytest.raises(StructureInvalid) as refused:
        parse_event(raw)
    assert refused.value.field == "data.entities[0].spans[0].field"


WORD = st.sampled_from(["alpha", "beta", "Gamma", "delta.", "\n\n", "x,"])


@hsettings(max_examples=60, deadline=None)
@given(words=st.lists(WORD, min_size=1, max_size=120), data=st.data())
def test_content_spans_fall_on_the_parts_holding_them(words: list[str],
                                                       data: st.DataObject) -> None:
    """Every span lands on parts, each landing is the same text as the content's span (whole)
    or a piece of it (clipped at a part's edge), and a span a part holds whole is never
    clipped."""
    content = " ".join(words)
    start = data.draw(st.integers(0, len(content) - 1))
    end = data.draw(st.integers(start + 1, len(content)))
    if not content[start:end].strip():
        return
    chunks = chunk_text(content, max_tokens=16, overlap_tokens=4)
    parts = [(uuid.uuid4(), c.start, c.end) for c in chunks]
    put = ObjectPut(kind="note", title="t", content=content, entities=[
        {"name": "E", "spans": [{"field": "content", "start": start, "end": end}]}])
    root = uuid.uuid4()
    placed = {r.row_id: r for r in split_structure(put, root, parts)}
    offsets = {pid: (s, e) for pid, s, e in parts}
    landed = [(pid, m) for pid, r in placed.items() for m in r.mentions]
    assert landed and all(pid in offsets for pid, _ in landed)
    whole = [pid for pid, s, e in parts if s <= start and end <= e]
    for pid, m in landed:
        s, _ = offsets[pid]
        piece = content[s + m.start:s + m.end]
        assert piece in content[start:end]
        if whole:
            assert pid in whole and piece == content[start:end]
