"""The model-backed extractors for real: spaCy's English pipeline (the `spacy` extra, installed
by `make install-spacy`), and the HTTP extractor against an OpenAI-compatible chat server run by
tests/httpserve.py (no language model ships here; the fake answers like one, inventions
included)."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from pipeline.domain.errors import ConfigError, ExtractorError, Unavailable
from pipeline.domain.mentions import TextField
from pipeline.entities import extractors
from pipeline.entities.extractors import HttpExtractor, build_extractor
from pipeline.entities.extractors.spacy_ import SpacyExtractor
from pipeline.settings import Settings
from tests.httpserve import json_handler, serve

# -- spaCy ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spacy_extractor() -> SpacyExtractor:
    extractor = build_extractor(Settings(entity_extractor="spacy"))
    assert isinstance(extractor, SpacyExtractor)
    return extractor


def test_spacy_finds_people_organisations_and_places(spacy_extractor: SpacyExtractor) -> None:
    text = "Barack Obama met Angela Merkel in Berlin to discuss Microsoft and 3 other firms."
    (extraction,) = spacy_extractor.extract([[TextField("content", text)]])
    got = {(m.text, m.label) for m in extraction.mentions}
    assert {("Barack Obama", "PERSON"), ("Angela Merkel", "PERSON"), ("Berlin", "GPE"),
            ("Microsoft", "ORG")} <= got
    assert not any(m.label in ("CARDINAL", "ORDINAL") for m in extraction.mentions)
    for m in extraction.mentions:
        assert text[m.start:m.end] == m.text


def test_spacy_keeps_the_identifier_and_quote_rules(spacy_extractor: SpacyExtractor) -> None:
    text = 'Call parse_http_request from "deep learning" code.'
    (extraction,) = spacy_extractor.extract([[TextField("content", text)]])
    by_text = {m.text: m for m in extraction.mentions}
    assert by_text["parse_http_request"].aliases == ("parse http request",)
    assert by_text['"deep learning"'].name == "deep learning"


def test_spacy_rows_in_order_fields_apart(spacy_extractor: SpacyExtractor) -> None:
    rows = [[TextField("title", "Paris"), TextField("content", "Apple hired Tim Cook.")], [],
            [TextField("content", "")], [TextField("content", "Google is in California.")]]
    out = spacy_extractor.extract(rows)
    assert len(out) == 4 and out[1].mentions == [] and out[2].mentions == []
    assert {m.field for m in out[0].mentions} == {"title", "content"}
    assert "Tim Cook" in {m.text for m in out[0].mentions}
    assert "California" in {m.text for m in out[3].mentions}


def test_spacy_refuses_a_field_longer_than_it_reads(spacy_extractor: SpacyExtractor) -> None:
    long = "a" * (spacy_extractor._nlp.max_length + 1)
    with pytest.raises(ExtractorError) as err:
        spacy_extractor.extract([[TextField("summary", long)]])
    assert err.value.field == "summary"


def test_spacy_with_a_model_that_is_not_installed_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        build_extractor(Settings(entity_extractor="spacy", entity_spacy_model="no_such_model"))
    assert err.value.field == "entity_spacy_model"


# -- HTTP ----------------------------------------------------------------------------------

# The fake model knows these names; it also "finds" one that is in no text (an invention).
KNOWN = [("Ada Lovelace", "PERSON", "Ada Lovelace"), ("Analytical Engine", "PRODUCT",
                                                    "analytical engine")]


def fake_model(requests: list[dict[str, Any]], *, content: str | None = None,
               status: int = 200) -> Any:
    def answer(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        requests.append({"path": path, **body})
        if status != 200:
            return status, {"error": {"message": "busy"}}
        if content is not None:
            return 200, {"choices": [{"message": {"role": "assistant", "content": content}}]}
        question = json.loads(body["messages"][1]["content"])
        rows = []
        for row in question["rows"]:
            text = " ".join(row["fields"].values())
            entities = [{"name": n, "label": label, "text": t} for n, label, t in KNOWN
                        if t.lower() in text.lower()]
            entities.append({"name": "Charles Babbage", "label": "PERSON",
                             "text": "Charles Babbage"})
            rows.append({"row": row["row"], "entities": entities, "triples": [
                {"subject": "Ada Lovelace", "predicate": "wrote about",
                 "object": "Analytical Engine"},
                {"subject": "Ada Lovelace", "predicate": "worked with",
                 "object": "Charles Babbage"}]})
        return 200, {"choices": [{"message": {"role": "assistant",
                                              "content": json.dumps({"rows": rows})}}]}
    return json_handler(answer)


ROW = [TextField("title", "Ada Lovelace"),
       TextField("content", "Ada Lovelace described the Analytical Engine. Ada Lovelace again.")]


def test_http_locates_every_occurrence_and_drops_inventions() -> None:
    requests: list[dict[str, Any]] = []
    with serve(fake_model(requests)) as url:
        extractor = HttpExtractor(url, model="m1", api_key="k" * 20)
        (extraction,) = extractor.extract([ROW])
    spans = sorted((m.field, m.start, m.text, m.name, m.label) for m in extraction.mentions)
    content = ROW[1].text
    assert spans == [
        ("content", 0, "Ada Lovelace", "Ada Lovelace", "PERSON"),
        ("content", content.index("Analytical"), "Analytical Engine", "Analytical Engine",
         "PRODUCT"),
        ("content", content.rindex("Ada"), "Ada Lovelace", "Ada Lovelace", "PERSON"),
        ("title", 0, "Ada Lovelace", "Ada Lovelace", "PERSON"),
    ]
    assert [(t.subject, t.predicate, t.object) for t in extraction.triples] == [
        ("Ada Lovelace", "wrote about", "Analytical Engine")]
    assert (extractor.unfound_names, extractor.dropped_triples) == (1, 1)
    (request,) = requests
    assert request["path"] == "/v1/chat/completions" and request["model"] == "m1"


def test_http_batches_rows_within_the_caps_and_skips_empty_rows() -> None:
    requests: list[dict[str, Any]] = []
    rows = [ROW, [], [TextField("content", "")], ROW, ROW, [TextField("content", "x" * 500)]]
    with serve(fake_model(requests)) as url:
        out = HttpExtractor(url, batch_rows=2, batch_chars=400).extract(rows)
    sent = [[r["row"] for r in json.loads(q["messages"][1]["content"])["rows"]]
            for q in requests]
    assert sent == [[0, 3], [4], [5]]  # two rows per request; the long row alone
    assert [len(e.mentions) for e in out] == [4, 0, 0, 4, 4, 0]


@pytest.mark.parametrize("status", [429, 500, 503])
def test_http_overload_and_server_errors_are_unavailable(status: int) -> None:
    with serve(fake_model([], status=status)) as url, pytest.raises(Unavailable):
        HttpExtractor(url).extract([ROW])


def test_http_unreachable_is_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused
        with pytest.raises(Unavailable):
            HttpExtractor(f"http://127.0.0.1:{port}/v1", timeout=5).extract([ROW])


@pytest.mark.parametrize(("content", "problem"), [
    ("Sure! Here are the entities: Ada", "not JSON"),
    ('{"entities": []}', "'rows'"),
    ('{"rows": [{"row": 7, "entities": []}]}', "row index 7"),
    ('{"rows": [{"row": 0, "entities": [{"label": "PERSON"}]}]}', "'name'"),
    ('{"rows": [{"row": 0, "triples": [{"subject": "a"}]}]}', "'predicate'"),
])
def test_http_malformed_answers_are_permanent_errors_naming_the_problem(
        content: str, problem: str) -> None:
    with serve(fake_model([], content=content)) as url, pytest.raises(ExtractorError) as err:
        HttpExtractor(url).extract([ROW])
    assert not isinstance(err.value, Unavailable)
    assert problem in err.value.message


def test_http_client_errors_are_permanent() -> None:
    with serve(fake_model([], status=400)) as url, pytest.raises(ExtractorError) as err:
        HttpExtractor(url).extract([ROW])
    assert not isinstance(err.value, Unavailable)


def test_http_accepts_fenced_json_and_a_full_route() -> None:
    content = '```json\n{"rows": [{"row": 0, "entities": [{"name": "Ada Lovelace", ' \
              '"label": "person", "text": "Ada Lovelace"}]}]}\n```'
    requests: list[dict[str, Any]] = []
    with serve(fake_model(requests, content=content)) as url:
        (extraction,) = HttpExtractor(f"{url}/chat/completions").extract([ROW])
    assert {m.label for m in extraction.mentions} == {"PERSON"}
    assert requests[0]["path"] == "/v1/chat/completions"


def test_build_http_extractor_from_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extractors, "HTTP_BATCH_ROWS", 3)
    with serve(fake_model([])) as url:
        extractor = build_extractor(Settings(entity_extractor="http", entity_http_url=url))
        assert isinstance(extractor, HttpExtractor) and extractor.batch_rows == 3
        assert len(extractor.extract([ROW])[0].mentions) == 4
    with pytest.raises(ConfigError):
        build_extractor(Settings(entity_extractor="http", entity_http_url="ftp://x"))
