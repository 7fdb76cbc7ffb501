"""The size limits of event fields (`schemas/limits.py`): a field at its limit parses, one past it
is refused with the usual code and the field named; the committed JSON Schemas say the same; the
shared examples and the datasets' documents fit well inside."""

from __future__ import annotations

import gzip
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from pipeline.domain.errors import InvalidInput
from schemas import limits
from schemas.events import parse_event, wrap_bare_object
from schemas.export import generate_schema_files

DATASETS = Path(__file__).resolve().parents[2] / "bench" / "datasets"
NS = uuid.uuid4()
A, B = str(uuid.uuid4()), str(uuid.uuid4())
LINK = {"from": A, "to": B, "relation_type": "knows"}


def _event(data: dict[str, Any], type_: str = "brainstream.object.put",
           **attributes: Any) -> bytes:
    env = {"specversion": "1.0", "id": "e-1", "source": "tests", "type": type_,
           "namespace": str(NS), "data": data, **attributes}
    return json.dumps(env).encode()


def _put(**data: Any) -> bytes:
    return _event({"kind": "company", **data})


def _link(**meta: Any) -> bytes:
    return _event({**LINK, "meta": meta}, "brainstream.link.put")


# (a record with the field holding n characters/items, the limit, code, field)
CASES: list[tuple[Any, int, str, str]] = [
    (lambda n: _event({"kind": "company"}, id="i" * n), limits.EVENT_ID_MAX,
     "invalid_envelope", "id"),
    (lambda n: _event({"kind": "company"}, source="s" * n), limits.EVENT_SOURCE_MAX,
     "invalid_envelope", "source"),
    (lambda n: _event({"kind": "company"}, subject="s" * n), limits.EVENT_SUBJECT_MAX,
     "invalid_envelope", "subject"),
    (lambda n: _event({"kind": "company"}, datacontenttype="application/" + "j" * (n - 17)
                      + "+json"), limits.MEDIA_TYPE_MAX, "invalid_envelope", "datacontenttype"),
    (lambda n: _put(title="t" * n), limits.TITLE_MAX, "invalid_payload", "data.title"),
    (lambda n: _put(summary="s" * n), limits.SUMMARY_MAX, "invalid_payload", "data.summary"),
    (lambda n: _put(content_type="c" * n), limits.MEDIA_TYPE_MAX, "invalid_payload",
     "data.content_type"),
    (lambda n: _put(properties={f"p{i}": i for i in range(n)}), limits.PROPERTIES_MAX,
     "invalid_payload", "data.properties"),
    (lambda n: _put(properties={"industry": "v" * n}), limits.PROPERTY_STRING_MAX,
     "invalid_payload", "data.properties.industry"),
    (lambda n: _put(properties={"tags": ["x", "v" * n]}), limits.PROPERTY_STRING_MAX,
     "invalid_payload", "data.properties.tags"),
    (lambda n: _put(properties={"tags": list(range(n))}), limits.PROPERTY_LIST_MAX,
     "invalid_payload", "data.properties.tags"),
    (lambda n: _put(properties={"k" * n: 1}), 63, "invalid_payload", "data.properties." + "k" * 64),
    (lambda n: _put(kind="k" * n), 63, "invalid_payload", "data.kind"),
    (lambda n: _event({**LINK, "relation_type": "r" * n}, "brainstream.link.put"), 63,
     "invalid_payload", "data.relation_type"),
    (lambda n: _link(note="n" * n), limits.NOTE_MAX, "invalid_payload", "data.meta.note"),
    (lambda n: _link(status="s" * n), limits.LINK_LABEL_MAX, "invalid_payload",
     "data.meta.status"),
    (lambda n: _link(role="r" * n), limits.LINK_LABEL_MAX, "invalid_payload", "data.meta.role"),
]


@pytest.mark.parametrize(("record", "limit", "code", "field"), CASES,
                         ids=[case[3][:40] for case in CASES])
def test_a_field_at_its_limit_parses_and_one_past_it_is_refused_by_name(
        record: Any, limit: int, code: str, field: str) -> None:
    parse_event(record(limit))
    with pytest.raises(InvalidInput) as refused:
        parse_event(record(limit + 1))
    assert (refused.value.code, refused.value.field) == (code, field)


def test_content_is_limited_in_characters_beyond_the_event_size() -> None:
    at_limit = _put(content="c" * limits.CONTENT_MAX)
    parse_event(at_limit, max_bytes=len(at_limit))
    over = _put(content="c" * (limits.CONTENT_MAX + 1))
    with pytest.raises(InvalidInput) as refused:
        parse_event(over, max_bytes=len(over))
    assert (refused.value.code, refused.value.field) == ("invalid_payload", "data.content")


def test_the_json_schemas_publish_the_limits() -> None:
    files = {name: json.loads(text) for name, text in generate_schema_files().items()}
    envelope = files["envelope.schema.json"]["properties"]
    assert envelope["id"]["maxLength"] == limits.EVENT_ID_MAX
    assert envelope["source"]["maxLength"] == limits.EVENT_SOURCE_MAX
    assert envelope["subject"]["anyOf"][0]["maxLength"] == limits.EVENT_SUBJECT_MAX
    put = files["object_put.schema.json"]["properties"]
    assert put["title"]["anyOf"][0]["maxLength"] == limits.TITLE_MAX
    assert put["content"]["anyOf"][0]["maxLength"] == limits.CONTENT_MAX
    assert put["properties"]["maxProperties"] == limits.PROPERTIES_MAX
    meta = files["link_put.schema.json"]["$defs"]["LinkMeta"]["properties"]
    assert meta["note"]["anyOf"][0]["maxLength"] == limits.NOTE_MAX


def _dataset_documents() -> list[dict[str, Any]]:
    """Each dataset document as the benchmarks put it (title, content), and LoCoMo's turns and
    session summaries with their fields as properties."""
    docs: list[dict[str, Any]] = []
    with gzip.open(DATASETS / "scifact" / "corpus.jsonl.gz", "rt") as lines:
        docs += [{"title": row["title"], "content": row["text"]}
                 for row in map(json.loads, lines) if row.get("title")]
    corpus = json.loads((DATASETS / "hotpotqa_train100" /
                         "hotpotqa_train_corpus.json").read_text())
    docs += [{"title": title, "content": "".join(text)} for title, text in corpus.items()]
    for conv in json.loads((DATASETS / "locomo_dev" / "locomo_dev.json").read_text()):
        for session in conv["conversation"].values():
            if isinstance(session, list):
                docs += [{"content": turn.pop("text"),
                          "properties": {k.replace("-", "_"): v for k, v in turn.items()}}
                         for turn in session]
        docs += [{"summary": text} for text in conv["session_summary"].values()]
    return docs


def test_the_datasets_documents_fit() -> None:
    docs = _dataset_documents()
    assert len(docs) > 6_000
    for i, data in enumerate(docs):
        event = wrap_bare_object({"kind": "document", **data}, NS, "bench", event_id=f"d{i}")
        parse_event(json.dumps(event).encode())
