"""Okapi BM25, and the corpus statistics it needs, cached for a short while.

Postgres has no BM25 (``ts_rank_cd`` has no IDF), so the lexical channel computes it itself:

    score(d, q) = sum over distinct query lexemes t of
        idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * len(d) / avglen))
    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

with tf and len(d) from the row's postings (`search_postings`: the positions of t in its
`lexical`, and `doc_len`), and N, df and avglen over the searchable rows of the namespace (filters
narrow the candidates, never the statistics). The SQL does the per-row sum; this module holds the
formula (for tests and callers), the pruning rules and the cache of N, avglen and df.

Exact top k without scoring every matching row (MaxScore, Turtle & Flood 1995): a term's
contribution is below its upper bound idf(t) * (k1 + 1) whatever tf and len(d). The rows matching
the rarest terms are scored first (exactly, with every query term); the k-th of those scores, θ,
is a real score, so a row matching only terms whose upper bounds sum to at most θ can never enter
the top k. Only rows matching one of the remaining ("essential") terms need scoring, and of
those only the ones whose partial score (essential terms) plus the other terms' bounds exceeds
θ; the answer is the exact BM25 top k. Common terms (the, cell, patient) rarely stay essential
once a rare term has set θ, which is what keeps a query over 100k parts from scoring half the
corpus.
"""

from __future__ import annotations

import math
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

DEFAULT_K1 = 0.9
DEFAULT_B = 0.4


@dataclass(frozen=True)
class BM25Params:
    """BM25's free parameters (Anserini's defaults: k1 = 0.9, b = 0.4)."""

    k1: float = DEFAULT_K1
    b: float = DEFAULT_B

    def __post_init__(self) -> None:
        if self.k1 < 0 or not 0.0 <= self.b <= 1.0:
            raise ValueError("BM25 needs k1 >= 0 and 0 <= b <= 1")


@dataclass(frozen=True)
class CorpusStats:
    """Document count and mean length (tokens) of a namespace's searchable rows."""

    n_docs: int
    avg_len: float


def idf(n_docs: int, df: int) -> float:
    """Lucene's non-negative BM25 IDF."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def safe_avg_len(avg_len: float) -> float:
    """The mean length used as divisor: a corpus of empty rows normalizes by 1, not 0."""
    return avg_len if avg_len > 0 else 1.0


def term_score(tf: int, idf_value: float, doc_len: int, avg_len: float,
               params: BM25Params) -> float:
    """One lexeme's contribution to one row's score."""
    norm = 1.0 - params.b + params.b * doc_len / safe_avg_len(avg_len)
    return idf_value * tf * (params.k1 + 1.0) / (tf + params.k1 * norm)


def score(tfs: Mapping[str, int], doc_len: int, idfs: Mapping[str, float], avg_len: float,
          params: BM25Params) -> float:
    """A row's BM25 score: tf per lexeme in the row, idf per (distinct) query lexeme."""
    return sum(term_score(tfs[t], w, doc_len, avg_len, params)
               for t, w in idfs.items() if tfs.get(t, 0) > 0)


def upper_bound(idf_value: float, params: BM25Params) -> float:
    """The supremum of one term's contribution: idf * (k1 + 1) (tf to infinity)."""
    return idf_value * (params.k1 + 1.0)


def rarest_terms(dfs: Mapping[str, int], budget: int) -> list[str]:
    """The rarest terms (df ascending, ties by lexeme) while their summed df stays within
    `budget` rows; at least one term, none when `dfs` is empty."""
    chosen: list[str] = []
    total = 0
    for term in sorted(dfs, key=lambda t: (dfs[t], t)):
        if chosen and total + dfs[term] > budget:
            break
        chosen.append(term)
        total += dfs[term]
    return chosen


def essential_terms(idfs: Mapping[str, float], threshold: float,
                    params: BM25Params) -> list[str]:
    """MaxScore's essential terms: drop the terms of lowest upper bound while the dropped
    bounds sum to at most `threshold` (a score some k rows reach); a row matching only dropped
    terms scores strictly below it. A relative margin of 1e-9 absorbs float rounding."""
    order = sorted(idfs, key=lambda t: (idfs[t], t))
    dropped = 0.0
    cut = 0
    for term in order:
        bound = upper_bound(idfs[term], params)
        if dropped + bound > threshold * (1.0 - 1e-9):
            break
        dropped += bound
        cut += 1
    return order[cut:]


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def tsquery_or(lexemes: Iterable[str]) -> str:
    """A tsquery text matching any of the (already normalized) lexemes, each quoted literally.

    Inside a quoted tsquery lexeme a quote is doubled and a backslash escaped; this is the value
    of a `%s::tsquery` parameter, never SQL text.
    """
    return " | ".join(_quote(lex) for lex in lexemes)


class StatsCache:
    """N/avglen per namespace and df per (namespace, lexeme), each kept `ttl` seconds.

    Within the TTL a write is not yet reflected in IDF and length normalization (a new row is
    still found and scored, with slightly stale weights); `ttl=0` disables caching.
    """

    def __init__(self, ttl: float = 30.0, *, max_entries: int = 100_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._clock = clock
        self._corpus: OrderedDict[uuid.UUID, tuple[float, CorpusStats]] = OrderedDict()
        self._df: OrderedDict[tuple[uuid.UUID, str], tuple[float, int]] = OrderedDict()

    def corpus(self, namespace: uuid.UUID) -> CorpusStats | None:
        """Cached corpus statistics, if still fresh."""
        entry = self._corpus.get(namespace)
        if entry is None or entry[0] <= self._clock():
            return None
        return entry[1]

    def dfs(self, namespace: uuid.UUID, lexemes: Iterable[str]) -> dict[str, int]:
        """The fresh cached df of those lexemes that have one."""
        now = self._clock()
        out: dict[str, int] = {}
        for lex in lexemes:
            entry = self._df.get((namespace, lex))
            if entry is not None and entry[0] > now:
                out[lex] = entry[1]
        return out

    def put(self, namespace: uuid.UUID, corpus: CorpusStats | None,
            dfs: Mapping[str, int]) -> None:
        """Remember statistics just read from the database."""
        if self.ttl <= 0:
            return
        expires = self._clock() + self.ttl
        if corpus is not None:
            self._corpus[namespace] = (expires, corpus)
            self._corpus.move_to_end(namespace)
        for lex, df in dfs.items():
            self._df[(namespace, lex)] = (expires, df)
            self._df.move_to_end((namespace, lex))
        for table in (self._corpus, self._df):
            while len(table) > self.max_entries:
                table.popitem(last=False)  # oldest write first


# More like this: how many of a document's most distinctive lexemes the lexical channel searches
# for (Lucene's and Tantivy's default): enough to find its topic, few to keep BM25's OR cheap.
LIKE_MAX_TERMS = 25


def distinctive_terms(tfs: Mapping[str, int], dfs: Mapping[str, int], n_docs: int,
                      max_terms: int) -> list[str]:
    """The `max_terms` terms of a document that tell it apart best (more like this): by tf x
    idf over the corpus, ties by term; terms no row of the corpus holds are left out."""
    scored = [(-tfs[t] * idf(n_docs, dfs[t]), t) for t in tfs if dfs.get(t, 0) > 0]
    return [t for _, t in sorted(scored)[:max(0, max_terms)]]
