"""Helpers of the extraction stage tests: a small, explicit extractor, writing events straight
into a database, and reading the entity tables back."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg

from pipeline.domain.errors import InvalidInput, Unavailable
from pipeline.domain.mentions import Extraction, Mention, TextField, Triple
from pipeline.settings import Settings
from tests.pipelineutil import apply_only

# Capitalised words and runs of them ("Ada Lovelace"); "X likes Y" is a triple.
_NAME = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)*")
_LIKES = re.compile(r"\b([A-Z][a-z]+) likes ([A-Z][a-z]+)")


class CapsExtractor:
    """Names are capitalised words (test texts avoid sentence-start capitals): enough to check
    the stage's bookkeeping against a rule a test can compute by hand. Refuses a row that says
    `refuse`; `down` makes every call an outage; `pause` holds each call that long."""

    name = "test-caps"

    def __init__(self, *, refuse: str | None = None, down: bool = False,
                 pause: float = 0.0) -> None:
        self.refuse = refuse
        self.down = down
        self.pause = pause
        self.calls: list[int] = []
        self.lock = threading.Lock()

    def extract(self, rows: Sequence[Sequence[TextField]]) -> list[Extraction]:
        with self.lock:
            self.calls.append(len(rows))
        if self.down:
            raise Unavailable("the test extractor is down")
        if self.refuse and any(self.refuse in f.text for row in rows for f in row):
            raise InvalidInput("the test extractor refuses this text", field="text")
        if self.pause:
            time.sleep(self.pause)
        return [extraction(row) for row in rows]


def extraction(row: Sequence[TextField]) -> Extraction:
    mentions = [Mention(name=m.group(0), label="NAME", field=f.field, start=m.start(),
                        end=m.end(), text=m.group(0), aliases=(m.group(0).replace(" ", ""),)
                        if " " in m.group(0) else ())
                for f in row for m in _NAME.finditer(f.text)]
    triples = [Triple(m.group(1), "likes", m.group(2)) for f in row
               for m in _LIKES.finditer(f.text)]
    return Extraction(mentions, triples)


def put(ns: uuid.UUID, oid: uuid.UUID, *, title: str, content: str | None = None,
        summary: str | None = None, kind: str = "company") -> dict[str, Any]:
    data: dict[str, Any] = {"id": str(oid), "kind": kind, "title": title}
    if content is not None:
        data["content"] = content
    if summary is not None:
        data["summary"] = summary
    return envelope("object.put", ns, data)


def delete(ns: uuid.UUID, oid: uuid.UUID) -> dict[str, Any]:
    return envelope("object.soft_delete", ns, {"id": str(oid)})


def envelope(event_type: str, ns: uuid.UUID, data: dict[str, Any]) -> dict[str, Any]:
    return {"specversion": "1.0", "id": str(uuid.uuid4()), "source": "tests",
            "type": f"brainstream.{event_type}", "datacontenttype": "application/json",
            "namespace": str(ns), "data": data}


# Apply events as the consumer would (no workers: the tests run the stage themselves).
apply = apply_only


def q(settings: Settings, statement: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        return conn.execute(statement, args).fetchall()


def entities(settings: Settings, ns: uuid.UUID) -> dict[str, tuple[uuid.UUID, int]]:
    """norm -> (id, part_count) of the namespace's live entities."""
    return {norm: (eid, n) for eid, norm, n in q(
        settings, "SELECT id, norm, part_count FROM entities WHERE namespace_id = %s"
        " AND merged_into IS NULL", ns)}


def cooccurs(settings: Settings, ns: uuid.UUID) -> dict[frozenset[str], float]:
    """{norm a, norm b} -> weight of the namespace's CO_OCCURS edges."""
    return {frozenset((a, b)): w for a, b, w in q(
        settings, "SELECT f.norm, t.norm, e.weight FROM entity_edges e"
        " JOIN entities f ON f.id = e.from_id JOIN entities t ON t.id = e.to_id"
        " WHERE e.namespace_id = %s AND e.edge_type = 'CO_OCCURS'", ns)}


def extraction_state(settings: Settings, root: uuid.UUID) -> dict[uuid.UUID, tuple[Any, ...]]:
    """row -> (status, attempts, updated_at, extracted_hash = text_hash) of a root's rows."""
    return {r[0]: r[1:] for r in q(
        settings, "SELECT row_id, status, attempts, updated_at, extracted_hash = text_hash"
        " FROM entity_extraction WHERE root_id = %s", root)}
