"""The ingestion benchmark's corpus: SciFact abstracts, and the put event of each (also what
`bench/extract` ingests for its stage rows).

A run publishes documents into a namespace of its own; object ids derive from the namespace and a
per-document key, so a document cycled in twice becomes two objects.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness.runenv import DATASETS, read_jsonl
from schemas.events import wrap_bare_object

CORPUS = DATASETS / "scifact" / "corpus.jsonl.gz"
SOURCE = "bench.ingest"
KIND = "doc"


@dataclass(frozen=True)
class Doc:
    """One SciFact abstract."""

    source_id: str
    title: str
    text: str


def load_corpus(path: Path = CORPUS) -> list[Doc]:
    """Every document of the corpus, in file order."""
    return [Doc(str(row["_id"]), str(row.get("title") or ""), str(row.get("text") or ""))
            for row in read_jsonl(path)]


def cycle_docs(corpus: Sequence[Doc], count: int) -> list[tuple[str, Doc]]:
    """`count` (key, doc) pairs taken from the corpus in order, wrapping around if needed; the
    key is unique per pair so a wrapped document becomes a new object."""
    return [(f"{corpus[i % len(corpus)].source_id}#{i // len(corpus)}", corpus[i % len(corpus)])
            for i in range(count)]


def object_id(namespace: uuid.UUID, key: str) -> uuid.UUID:
    """The deterministic object id of a document in a run's namespace."""
    return uuid.uuid5(namespace, f"scifact:{key}")


def put_envelope(namespace: uuid.UUID, key: str, doc: Doc) -> dict[str, Any]:
    """The put event of one document (kind `doc`, the abstract as content)."""
    data: dict[str, Any] = {"id": str(object_id(namespace, key)), "kind": KIND,
                            "content": doc.text}
    if doc.title:
        data["title"] = doc.title
    return wrap_bare_object(data, namespace, SOURCE, event_id=f"{namespace}/{key}")
