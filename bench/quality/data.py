"""The quality benchmark's datasets (SciFact train, HotpotQA's 100 questions), their put events,
and their passage through the real write path into a stack.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from bench.harness.inprocess import apply_events, embed_and_relay
from bench.harness.runenv import DATASETS, log, read_jsonl
from pipeline.settings import Settings
from pipeline.wiring import Services
from schemas.events import wrap_bare_object

SOURCE = "bench.quality"
KIND = "doc"
SCIFACT = DATASETS / "scifact"
HOTPOT = DATASETS / "hotpotqa_train100"
NS_SCIFACT = uuid.uuid5(uuid.NAMESPACE_URL, "brainstream-bench/quality/scifact")
NS_HOTPOT = uuid.uuid5(uuid.NAMESPACE_URL, "brainstream-bench/quality/hotpotqa")


@dataclass(frozen=True)
class Dataset:
    """Documents (key -> (title, text)), queries (id -> text) and graded judgements."""

    name: str
    namespace: uuid.UUID
    docs: dict[str, tuple[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    cutoffs: tuple[int, ...]

    def object_id(self, key: str) -> uuid.UUID:
        """The deterministic object id of a document."""
        return uuid.uuid5(self.namespace, f"{self.name}:{key}")


def load_scifact(max_queries: int | None) -> Dataset:
    """SciFact corpus, train queries and qrels; a subset of N queries takes N evenly spaced
    over the train query ids in numeric order."""
    docs = {str(row["_id"]): (str(row.get("title") or ""), str(row.get("text") or ""))
            for row in read_jsonl(SCIFACT / "corpus.jsonl.gz")}
    texts = {str(row["_id"]): str(row["text"]) for row in read_jsonl(SCIFACT / "queries.jsonl")}
    qrels: dict[str, dict[str, int]] = {}
    with open(SCIFACT / "qrels" / "train.tsv", encoding="utf-8") as handle:
        next(handle)  # header
        for line in handle:
            qid, did, score = line.split()
            qrels.setdefault(qid, {})[did] = int(score)
    ids = sorted(qrels, key=int)
    if max_queries and max_queries < len(ids):  # evenly spaced over the ids, deterministic
        step = len(ids) / max_queries
        ids = [ids[int(i * step)] for i in range(max_queries)]
    return Dataset("scifact", NS_SCIFACT, docs, {q: texts[q] for q in ids},
                   {q: qrels[q] for q in ids}, (10, 100))


def load_hotpot() -> Dataset:
    """HotpotQA's 994 passages (title -> joined sentences) and 100 questions with 2 gold titles."""
    with open(HOTPOT / "hotpotqa_train_corpus.json", encoding="utf-8") as handle:
        corpus = json.load(handle)
    docs = {str(title): (str(title), "".join(sentences)) for title, sentences in corpus.items()}
    with open(HOTPOT / "hotpotqa_train.json", encoding="utf-8") as handle:
        questions = json.load(handle)
    queries = {str(q["_id"]): str(q["question"]) for q in questions}
    qrels = {str(q["_id"]): {str(title): 1 for title, _ in q["supporting_facts"]}
             for q in questions}
    return Dataset("hotpotqa", NS_HOTPOT, docs, queries, qrels, (2, 5))


def put_events(dataset: Dataset) -> list[dict[str, Any]]:
    """One `object.put` per document: title as title, text as content (chunked into parts)."""
    events = []
    for key, (title, text) in dataset.docs.items():
        data: dict[str, Any] = {"id": str(dataset.object_id(key)), "kind": KIND, "content": text}
        if title:
            data["title"] = title
        events.append(wrap_bare_object(data, dataset.namespace, SOURCE,
                                       event_id=f"{dataset.name}:{key}"))
    return events


def stored_parts(settings: Settings, namespace: uuid.UUID) -> list[tuple[uuid.UUID, uuid.UUID,
                                                                           str]]:
    """(part id, parent id, parent title + chunk) of the namespace's visible parts."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        rows = conn.execute(
            "SELECT id, parent_id, coalesce(context_title, '') || ' ' || coalesce(content, '')"
            " FROM objects WHERE namespace_id = %s AND parent_id IS NOT NULL"
            " AND deleted_at IS NULL ORDER BY id", (namespace,)).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def counts(settings: Settings, namespace: uuid.UUID) -> tuple[int, int, int]:
    """(documents, parts, rows embedded) of a namespace."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE o.parent_id IS NULL),"
            " count(*) FILTER (WHERE o.parent_id IS NOT NULL),"
            " count(*) FILTER (WHERE e.embed_status = 'done')"
            " FROM objects o JOIN object_embeddings e ON e.id = o.id"
            " WHERE o.namespace_id = %s", (namespace,)).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def ingest(settings: Settings, services: Services, datasets: Sequence[Dataset], reuse: bool
           ) -> dict[str, str]:
    """Write every dataset through the write path unless already complete (with --reuse)."""
    info: dict[str, str] = {}
    todo = []
    for ds in datasets:
        docs, _, done = counts(settings, ds.namespace)
        if reuse and docs == len(ds.docs) and done > 0:
            info[ds.name] = "reused from an earlier run"
        else:
            todo.append(ds)
    if not todo:
        return info
    assert services.embedder is not None, "the embedder did not load"
    started = time.perf_counter()
    events = [e for ds in todo for e in put_events(ds)]
    apply_events(settings, events)
    applied_s = time.perf_counter() - started
    log(f"applied {len(events)} puts in {applied_s:.1f}s; embedding ...")
    rows, embed_s, relay_s = embed_and_relay(settings, services.embedder)
    for ds in todo:
        info[ds.name] = "ingested in this run"
    info["write path"] = (f"apply {applied_s:.0f} s, embed {rows} rows in {embed_s:.0f} s "
                          f"({rows / max(embed_s, 1e-9):.1f}/s), relay {relay_s:.0f} s")
    log(info["write path"])
    return info
