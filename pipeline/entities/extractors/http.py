"""The HTTP extractor: an OpenAI-compatible chat-completions endpoint reads entities and triples.

Contract: POST `{"model", "messages", "temperature": 0, "response_format": {"type":
"json_object"}}` to `.../chat/completions`. The user message is JSON `{"rows": [{"row": i,
"fields": {"content": "..."}}]}`; the answer's `choices[0].message.content` must be JSON
`{"rows": [{"row": i, "entities": [{"name", "label", "text"}], "triples": [{"subject",
"predicate", "object"}]}]}`. A row the answer leaves out found nothing.

A model quotes text, it does not count characters: each entity's `text` is looked up in the
row's fields (every occurrence; case-insensitively if it is not there verbatim) and becomes one
mention per occurrence. Names whose text is in no field, and triples whose subject or object is
not one of the row's found names, are dropped and counted (`unfound_names`, `dropped_triples`):
that is where a model's inventions go. Rows go in batches of at most `batch_rows` rows and
`batch_chars` characters (a longer row goes alone); one failed batch fails the whole call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pipeline.domain.errors import ExtractorError, ExtractorUnavailable
from pipeline.domain.mentions import Extraction, Mention, TextField, Triple
from pipeline.entities.extractors.spans import longest_first, occurrences
from pipeline.entities.names import normalise
from pipeline.openai_compat import NO_RETRY, CallerErrors, OpenAICompatClient, RetryPolicy, excerpt

ERRORS = CallerErrors("extractor", "entity_http_url", ExtractorUnavailable, ExtractorError)
_DEFAULT_LABEL = "ENTITY"
SYSTEM_PROMPT = (
    "You extract named entities and the relations the text states between them. The user "
    'sends JSON {"rows": [{"row": <int>, "fields": {<field>: <text>}}]}. Answer with JSON only: '
    '{"rows": [{"row": <int>, "entities": [{"name": <canonical name>, "label": <PERSON, ORG, '
    'GPE, LOC, PRODUCT, EVENT, WORK_OF_ART, LAW, CONCEPT, ...>, "text": <the exact words as '
    'they appear in the row>}], "triples": [{"subject": <entity name>, "predicate": <short '
    'verb phrase>, "object": <entity name>}]}]}. Copy "text" verbatim from the row; use only '
    "entity names as subjects and objects; leave out rows that name nothing."
)


class HttpExtractor:
    """Client of an OpenAI-compatible chat endpoint; create it in the process that uses it
    (it owns a pooled HTTP client)."""

    name = "http"

    def __init__(self, url: str, *, model: str | None = None, api_key: str | None = None,
                 timeout: float = 60.0, batch_rows: int = 16, batch_chars: int = 24_000,
                 max_mentions: int = 200, retry: RetryPolicy = NO_RETRY) -> None:
        """`model` is sent as given (omitted when None); `api_key` becomes a bearer token."""
        if min(batch_rows, batch_chars, max_mentions) < 1:
            raise ValueError("batch sizes and max_mentions must be positive")
        self._client = OpenAICompatClient(url, "chat/completions", ERRORS, model=model,
                                          api_key=api_key, timeout=timeout, retry=retry)
        self.endpoint = self._client.endpoint
        self.model = model
        self.batch_rows = batch_rows
        self.batch_chars = batch_chars
        self.max_mentions = max_mentions
        self.unfound_names = 0
        self.dropped_triples = 0

    def close(self) -> None:
        """Close the pooled connections."""
        self._client.close()

    def extract(self, rows: Sequence[Sequence[TextField]]) -> list[Extraction]:
        """One `Extraction` per row, in order; rows without text cost no request."""
        out = [Extraction() for _ in rows]
        for batch in self._batches(rows):
            answers = self._ask({i: rows[i] for i in batch})
            for i in batch:
                out[i] = self._extraction(rows[i], answers.get(i, {}))
        return out

    def _batches(self, rows: Sequence[Sequence[TextField]]) -> list[list[int]]:
        batches: list[list[int]] = []
        size = 0
        for i, row in enumerate(rows):
            chars = sum(len(f.text) for f in row)
            if not chars:
                continue
            if not batches or len(batches[-1]) >= self.batch_rows or (
                    size + chars > self.batch_chars):
                batches.append([])
                size = 0
            batches[-1].append(i)
            size += chars
        return batches

    def _ask(self, rows: dict[int, Sequence[TextField]]) -> dict[int, dict[str, Any]]:
        """The answer's rows by index; transport trouble and 408/429/5xx are transient."""
        question = {"rows": [{"row": i, "fields": {f.field: f.text for f in row if f.text}}
                             for i, row in rows.items()]}
        body = self._client.chat_json([
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": json.dumps(question, ensure_ascii=False)}])
        return _answer_rows(self.endpoint, body, set(rows))

    def _extraction(self, row: Sequence[TextField], answer: dict[str, Any]) -> Extraction:
        candidates: list[Mention] = []
        for entity in answer.get("entities", []):
            name, label, text = entity["name"], entity["label"], entity["text"]
            spans = [(f, start) for f in row for start in occurrences(f.text, text)]
            if not spans:
                self.unfound_names += 1
                continue
            candidates.extend(
                Mention(name=name, label=label, field=f.field, start=start,
                        end=start + len(text), text=f.text[start:start + len(text)])
                for f, start in spans)
        mentions = longest_first(candidates, row, self.max_mentions)
        found = {normalise(m.name) for m in mentions}
        triples: list[Triple] = []
        for t in answer.get("triples", []):
            if normalise(t["subject"]) in found and normalise(t["object"]) in found:
                triples.append(Triple(t["subject"], t["predicate"], t["object"]))
            else:
                self.dropped_triples += 1
        return Extraction(mentions=mentions, triples=triples)


def _answer_rows(where: str, body: Any, asked: set[int]) -> dict[int, dict[str, Any]]:
    """The rows of an answer's JSON, checked against the contract; anything off it is
    permanent (asking again gets the same answer from a deterministic model)."""
    rows = body.get("rows") if isinstance(body, dict) else None
    if not isinstance(rows, list):
        raise ExtractorError(f"extractor {where} returned no 'rows' list: "
                             f"{excerpt(json.dumps(body))}")
    out: dict[int, dict[str, Any]] = {}
    for item in rows:
        index = item.get("row") if isinstance(item, dict) else None
        if type(index) is not int or index not in asked or index in out:
            raise ExtractorError(f"extractor {where} returned a missing, unknown or duplicate "
                                 f"row index {index!r}")
        out[index] = {"entities": _entities(where, item.get("entities", [])),
                      "triples": _triples(where, item.get("triples", []))}
    return out


def _entities(where: str, items: object) -> list[dict[str, str]]:
    if not isinstance(items, list):
        raise ExtractorError(f"extractor {where} returned 'entities' that is not a list")
    out = []
    for item in items:
        name = item.get("name") if isinstance(item, dict) else None
        text = item.get("text", name) if isinstance(item, dict) else None
        label = (item.get("label") or _DEFAULT_LABEL) if isinstance(item, dict) else None
        if not (isinstance(name, str) and isinstance(text, str) and isinstance(label, str)):
            raise ExtractorError(f"extractor {where} returned an entity without string "
                                 f"'name', 'text' and 'label': {excerpt(json.dumps(item))}")
        if name.strip() and text.strip():
            out.append({"name": name.strip(), "label": label.strip().upper(), "text": text})
    return out


def _triples(where: str, items: object) -> list[dict[str, str]]:
    if not isinstance(items, list):
        raise ExtractorError(f"extractor {where} returned 'triples' that is not a list")
    out = []
    for item in items:
        parts = [item.get(k) if isinstance(item, dict) else None
                 for k in ("subject", "predicate", "object")]
        if not all(isinstance(p, str) and p.strip() for p in parts):
            raise ExtractorError(f"extractor {where} returned a triple without string "
                                 f"'subject', 'predicate' and 'object': "
                                 f"{excerpt(json.dumps(item))}")
        subject, predicate, obj = (str(p).strip() for p in parts)
        out.append({"subject": subject, "predicate": predicate, "object": obj})
    return out

