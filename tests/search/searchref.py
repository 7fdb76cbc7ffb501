"""Independent references for the read-side tests: the rows as Python values, which of them are
searchable, what the filters mean, and BM25 recomputed from each row's tsvector.

Nothing here imports the code under test's SQL: the semantics are written a second time, plainly.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from pipeline.domain.conditions import matches
from pipeline.domain.read_model import Filters
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import IngestOptions, RawRecord
from pipeline.ingest.store.events import PgEventStore
from pipeline.lexical.vocab import refresh_vocab

OPTIONS = IngestOptions(chunk_max_tokens=20, chunk_overlap_tokens=0)


def apply_events(conn: psycopg.Connection[Any], events: Sequence[dict[str, Any]]) -> None:
    """Write events through the real write path; every one must apply."""
    records = [RawRecord("t", 0, i, None, json.dumps(e).encode()) for i, e in enumerate(events)]
    with conn.transaction():
        outcome = apply_batch(PgEventStore(conn), records, OPTIONS)
    assert not outcome.dead, [d.error.to_dict() for d in outcome.dead]
    # the worker's sweep does this in the running pipeline
    while refresh_vocab(conn) is None:
        time.sleep(0.05)


@dataclass(frozen=True)
class Row:
    id: uuid.UUID
    namespace_id: uuid.UUID
    kind: str
    title: str | None
    properties: dict[str, Any]
    content: str | None
    parent_id: uuid.UUID | None
    position: int | None
    created_at: datetime
    updated_at: datetime
    deleted: bool
    doc_len: int
    tf: dict[str, int]  # lexeme -> number of positions in `lexical`


def load_rows(conn: psycopg.Connection[Any]) -> dict[uuid.UUID, Row]:
    """Every row of the database (all namespaces, deleted ones too)."""
    tfs: dict[uuid.UUID, dict[str, int]] = {}
    for oid, lexeme, n in conn.execute(
            "SELECT o.id, u.lexeme, coalesce(array_length(u.positions, 1), 1)"
            " FROM objects o, unnest(o.lexical) u").fetchall():
        tfs.setdefault(oid, {})[lexeme] = n
    rows = conn.execute(
        "SELECT id, namespace_id, kind, title, properties, content, parent_id, position,"
        " created_at, updated_at, deleted_at IS NOT NULL, doc_len FROM objects").fetchall()
    return {r[0]: Row(*r, tf=tfs.get(r[0], {})) for r in rows}


def searchable(rows: dict[uuid.UUID, Row], namespace: uuid.UUID) -> dict[uuid.UUID, Row]:
    """Searchable row id -> its promoted object."""
    out: dict[uuid.UUID, Row] = {}
    for row in rows.values():
        if row.namespace_id != namespace or row.deleted:
            continue
        if row.parent_id is not None:
            parent = rows[row.parent_id]
            if not parent.deleted and parent.namespace_id == namespace:
                out[row.id] = parent
        elif not any(r.parent_id == row.id and not r.deleted for r in rows.values()):
            out[row.id] = row
    return out


def _property_ok(props: dict[str, Any], name: str, values: Iterable[Any]) -> bool:
    if name not in props:
        return False
    have = props[name]
    for v in values:
        if _same(have, v) or (isinstance(have, list) and any(_same(h, v) for h in have)):
            return True
    return False


def _same(a: Any, b: Any) -> bool:
    # JSON equality: a boolean is never a number
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def passes(row_id: uuid.UUID, promoted: Row, filters: Filters,
           scope: Sequence[uuid.UUID]) -> bool:
    """Filters judge the promoted object; scope admits the row or its promoted object."""
    if filters.kinds and promoted.kind not in filters.kinds:
        return False
    if filters.title is not None and (
            promoted.title is None or filters.title.lower() not in promoted.title.lower()):
        return False
    if filters.created_after and not promoted.created_at >= filters.created_after:
        return False
    if filters.created_before and not promoted.created_at < filters.created_before:
        return False
    if filters.updated_after and not promoted.updated_at >= filters.updated_after:
        return False
    if filters.updated_before and not promoted.updated_at < filters.updated_before:
        return False
    if not all(_property_ok(promoted.properties, n, vs) for n, vs in filters.properties):
        return False
    if filters.where is not None and not matches(filters.where, promoted.properties):
        return False
    return not scope or row_id in scope or promoted.id in scope


def bm25_reference(rows: dict[uuid.UUID, Row], namespace: uuid.UUID, lexemes: Sequence[str],
                   filters: Filters, scope: Sequence[uuid.UUID], *, k1: float = 0.9,
                   b: float = 0.4) -> dict[uuid.UUID, float]:
    """BM25 of every filtered searchable row containing a query lexeme; statistics over all
    searchable rows of the namespace."""
    corpus = searchable(rows, namespace)
    n = len(corpus)
    avgdl = sum(rows[i].doc_len for i in corpus) / n if n else 0.0
    avgdl = avgdl if avgdl > 0 else 1.0
    df = {t: sum(1 for i in corpus if t in rows[i].tf) for t in set(lexemes)}
    out: dict[uuid.UUID, float] = {}
    for rid, promoted in corpus.items():
        row = rows[rid]
        if not passes(rid, promoted, filters, scope) or not any(t in row.tf for t in df):
            continue
        total = 0.0
        for t in set(lexemes):
            tf = row.tf.get(t, 0)
            if tf:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                total += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * row.doc_len / avgdl))
        out[rid] = total
    return out
