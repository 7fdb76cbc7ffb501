"""BM25 as Tantivy defines it, written a second time from its documentation: k1 = 1.2, b = 0.75,
IDF ln(1 + (N - df + 0.5) / (df + 0.5)), the mean length exact, and each document's own length
as stored in one byte (exact up to 40 tokens; above, floored to 3 significant bits past 24, as
Lucene's SmallFloat.intToByte4 does)."""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence

from pipeline.domain.read_model import Filters
from tests.search.searchref import Row, passes, searchable

K1 = 1.2
B = 0.75


def stored_length(n: int) -> int:
    """A document length as Tantivy's one-byte field norm keeps it."""
    if n <= 40:
        return n
    x = n - 24
    shift = x.bit_length() - 4
    return 24 + ((x >> shift) << shift)


def tantivy_bm25(rows: dict[uuid.UUID, Row], namespace: uuid.UUID, lexemes: Sequence[str],
                 filters: Filters, scope: Sequence[uuid.UUID]) -> dict[uuid.UUID, float]:
    """Score of every filtered searchable row holding a query lexeme; statistics over all
    searchable rows of the namespace."""
    corpus = searchable(rows, namespace)
    n = len(corpus)
    avgdl = sum(rows[i].doc_len for i in corpus) / n
    terms = set(lexemes)
    df = {t: sum(1 for i in corpus if t in rows[i].tf) for t in terms}
    out: dict[uuid.UUID, float] = {}
    for rid, promoted in corpus.items():
        row = rows[rid]
        if not passes(rid, promoted, filters, scope) or not any(t in row.tf for t in terms):
            continue
        norm = 1 - B + B * stored_length(row.doc_len) / avgdl
        out[rid] = sum(math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                       * (K1 + 1) * row.tf[t] / (row.tf[t] + K1 * norm)
                       for t in terms if t in row.tf)
    return out
