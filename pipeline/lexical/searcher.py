"""The lexical channels on Tantivy: BM25 and near-spellings over one namespace's index.

Readers open a namespace's index on its first search and keep it (at most `open_indexes`, least
recently searched closed first). Each search first looks at the index's meta.json (one stat)
and reloads when the writer has committed since (Tantivy's `reload`, ~50 µs): a row the writer
has committed is searchable on the next search in every API process of the host, so a part is
searchable as soon as the host's replica cursor has passed its log row (moved after the
commit). Tantivy's
own commit-watching reader would poll every index's meta.json from a thread per open index and
lag a commit by up to half a second. A namespace without an index yet (nothing written)
answers nothing.

BM25 is Tantivy's: k1 = 1.2 and b = 0.75, fixed in Tantivy (the SQL BM25 uses 0.9 and 0.4, see
docs/lexical.md), IDF as ours, document lengths stored in one byte (exact up to 40 tokens,
then within a few percent). The query's lexemes come from `lexemes` (Postgres's `to_tsvector`,
cached), so query and documents share one analysis.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import ParamSpec, TypeVar

import tantivy

from pipeline.domain.bm25 import LIKE_MAX_TERMS
from pipeline.domain.errors import EngineFailed
from pipeline.domain.read_model import Filters, Hit
from pipeline.lexical.conditions import condition_query
from pipeline.lexical.documents import (
    ID_HI,
    ID_LO,
    ROOT_HI,
    ROOT_LO,
    SCHEMA,
    TEXT,
    id_from_halves,
    is_stale,
    namespace_dir,
    open_index,
)
from pipeline.lexical.queries import filter_clauses, filtered, lead_documents

Lexemes = Callable[[str], Awaitable[list[str]]]
Stamp = tuple[int, int, int] | None
P = ParamSpec("P")
T = TypeVar("T")

log = logging.getLogger(__name__)


async def run_tantivy(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn` off the event loop; a Rust panic inside Tantivy (pyo3's PanicException, a
    BaseException no handler of the API would catch: the caller got a plain-text 500) becomes
    `EngineFailed`, a JSON 500 for this request alone."""
    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":
            raise
        log.error("Tantivy panicked in %s: %s", getattr(fn, "__name__", fn), exc,
                  exc_info=exc)
        raise EngineFailed(f"the lexical engine failed on this query: {exc}") from None


def _stamp(path: Path) -> Stamp:
    """What identifies the index's current commit on disk: Tantivy replaces meta.json (a new
    file) on every commit."""
    try:
        st = os.stat(path / "meta.json")
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


class TantivySearcher:
    """`search_lexical` (BM25) and `search_fuzzy` (near-spellings) of one index generation."""

    def __init__(self, data_dir: Path, generation: int, lexemes: Lexemes, *,
                 fuzzy_distance: int = 1, fuzzy_min_chars: int = 4, fuzzy_max_words: int = 16,
                 open_indexes: int = 256,
                 replica_cursor: Callable[[], tuple[int, int] | None] | None = None) -> None:
        self.data_dir = data_dir
        self.generation = generation
        self.lexemes = lexemes
        self.fuzzy_distance = fuzzy_distance
        self.fuzzy_min_chars = fuzzy_min_chars
        self.fuzzy_max_words = fuzzy_max_words
        self.open_indexes = open_indexes
        # the cursor of the replica these indexes are (its state file; None: not built yet)
        self.replica_cursor = replica_cursor
        # namespace -> (its index, the stamp of the meta.json its reader last loaded, whether
        # it has an older schema: a rebuild replaces such an index, which is then reopened)
        self._indexes: OrderedDict[uuid.UUID, tuple[tantivy.Index, Stamp, bool]] = (
            OrderedDict())
        self._lock = threading.Lock()

    def index(self, namespace: uuid.UUID) -> tantivy.Index | None:
        """The namespace's index at its last commit (opened once, reloaded when meta.json
        changed); None if none exists."""
        path = namespace_dir(self.data_dir, self.generation, namespace)
        with self._lock:
            opened = self._indexes.get(namespace)
            if opened is not None:
                self._indexes.move_to_end(namespace)
                kept, loaded, stale = opened
                stamp = _stamp(path)
                if stamp == loaded or stamp is None:
                    # None: a rebuild is swapping the directory; the loaded state still serves
                    return kept
                if not stale and not is_stale(path):
                    kept.reload()
                    self._indexes[namespace] = (kept, stamp, stale)
                    return kept
                del self._indexes[namespace]  # reopened below, with the schema it has now
            stamp = _stamp(path)  # before opening: a commit in between reloads next time
            stale = is_stale(path)
            index = open_index(path, create=False)
            if index is None:
                return None
            index.config_reader(reload_policy="Manual")
            self._indexes[namespace] = (index, stamp, stale)
            while len(self._indexes) > self.open_indexes:
                self._indexes.popitem(last=False)
            return index

    def current_index(self, namespace: uuid.UUID) -> tantivy.Index | None:
        """The namespace's index if it has the current schema (None: none, or stale)."""
        index = self.index(namespace)
        with self._lock:
            opened = self._indexes.get(namespace)
        return None if index is None or opened is None or opened[2] else index

    async def search_lexical(self, namespace: uuid.UUID, query: str, filters: Filters,
                             scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Top k rows by BM25 over the query's distinct lexemes (OR), ties by id."""
        filter_clauses(filters, scope_ids)  # invalid filters fail, even when nothing matches
        if k <= 0:
            return []
        lexemes = await self.lexemes(query)
        if not lexemes:
            return []
        return await run_tantivy(self._bm25, namespace, lexemes, filters, scope_ids, k)

    def _bm25(self, namespace: uuid.UUID, lexemes: Sequence[str], filters: Filters,
              scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        index = self.index(namespace)
        if index is None:
            return []
        scoring = tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(SCHEMA, TEXT, lex))
             for lex in lexemes])
        return _top(index.searcher(), filtered(scoring, filters, scope_ids), k)

    async def search_like(self, namespace: uuid.UUID, terms: Mapping[str, int],
                          filters: Filters, scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """More like this: Tantivy's MoreLikeThis over a document's lexemes (`terms`: lexeme
        -> its frequency in the document): its `LIKE_MAX_TERMS` best by tf x idf, each boosted
        by that score."""
        filter_clauses(filters, scope_ids)
        if k <= 0 or not terms:
            return []
        return await run_tantivy(self._like, namespace, terms, filters, scope_ids, k)

    def _like(self, namespace: uuid.UUID, terms: Mapping[str, int], filters: Filters,
              scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        index = self.index(namespace)
        if index is None:
            return []
        searcher = index.searcher()
        dfs = {lex: searcher.doc_freq(TEXT, lex) for lex in terms}
        if any(df > searcher.num_docs for df in dfs.values()):
            # Tantivy's MoreLikeThis panics (an uncatchable 500) when a term's document count,
            # deleted documents included until a merge, passes the live ones: its own terms
            scoring = _like_query(searcher.num_docs, terms, dfs)
        else:
            # the raw tokenizer makes each value one term: a lexeme repeated tf times counts tf
            values = [lex for lex, tf in sorted(terms.items()) for _ in range(max(1, tf))]
            scoring = tantivy.Query.more_like_this_document_fields_query(
                SCHEMA, {TEXT: values}, min_doc_frequency=1, min_term_frequency=1,
                max_query_terms=LIKE_MAX_TERMS, boost_factor=1.0)
        return _top(searcher, filtered(scoring, filters, scope_ids), k)

    async def where_roots(self, namespace: uuid.UUID, filters: Filters, cap: int
                          ) -> tuple[list[uuid.UUID], tuple[int, int]] | None:
        """The promoted objects passing `filters.where` as this host's replica holds them (one
        lead document each, its properties fast fields), at most `cap` + 1 (more than `cap`:
        the `where` is not narrow), and the replica's cursor (xid, id): the index holds every
        change log row up to it, those beyond are its lag. None without a `where`, a replica
        state (`replica_cursor`) or a current index. The dense channel starts from these where
        Postgres would test every object's properties, and tests the lagging objects itself
        (`PgPartSearcher`)."""
        if filters.where is None or self.replica_cursor is None:
            return None
        clause = condition_query(filters.where)
        return await run_tantivy(self._where_roots, namespace, clause, cap)

    def _where_roots(self, namespace: uuid.UUID, clause: tantivy.Query, cap: int
                     ) -> tuple[list[uuid.UUID], tuple[int, int]] | None:
        # the cursor first: the index opened after it holds at least what the cursor says
        cursor = None if self.replica_cursor is None else self.replica_cursor()
        index = None if cursor is None else self.current_index(namespace)
        if cursor is None or index is None:
            return None
        searcher = index.searcher()
        query = tantivy.Query.boolean_query([(tantivy.Occur.Must, lead_documents()),
                                             (tantivy.Occur.Must, clause)])
        addresses = [a for _, a in searcher.search(query, cap + 1, count=False,
                                                   order_by_field=ROOT_HI).hits]
        his = searcher.fast_field_values(ROOT_HI, addresses)
        los = searcher.fast_field_values(ROOT_LO, addresses)
        return ([id_from_halves(int(h or 0), int(lo or 0)) for h, lo in zip(his, los, strict=True)],
                cursor)

    async def search_fuzzy(self, namespace: uuid.UUID, query: str, filters: Filters,
                           scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Near-spellings: rows holding a term within `fuzzy_distance` edits of a query lexeme
        the index does not know (at least `fuzzy_min_chars` long; the `fuzzy_max_words` longest
        are tried). A row scores the number of such words it holds near; ties by id."""
        filter_clauses(filters, scope_ids)
        if k <= 0 or not query.strip():
            return []
        words = [w for w in await self.lexemes(query) if len(w) >= self.fuzzy_min_chars]
        words = sorted(words, key=lambda w: (-len(w), w))[: self.fuzzy_max_words]
        if not words:
            return []
        return await run_tantivy(self._fuzzy, namespace, words, filters, scope_ids, k)

    def _fuzzy(self, namespace: uuid.UUID, words: Sequence[str], filters: Filters,
               scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        index = self.index(namespace)
        if index is None:
            return []
        searcher = index.searcher()
        unknown = [w for w in words if searcher.doc_freq(TEXT, w) == 0]
        if not unknown:
            return []  # every word is the BM25 channel's
        scoring = tantivy.Query.boolean_query([
            (tantivy.Occur.Should, tantivy.Query.const_score_query(
                tantivy.Query.fuzzy_term_query(SCHEMA, TEXT, w, distance=self.fuzzy_distance,
                                               transposition_cost_one=True), 1.0))
            for w in unknown])
        return _top(searcher, filtered(scoring, filters, scope_ids), k, floor=1.0)


def _like_query(live: int, terms: Mapping[str, int], dfs: Mapping[str, int]) -> tantivy.Query:
    """MoreLikeThis as Tantivy builds it: each held term's tf x BM25 idf, the
    `LIKE_MAX_TERMS` + 1 best (ties by lexeme, where Tantivy's follow a hash order), each a term
    query without frequencies boosted by its score over the best's; but with the live document
    count (`live`) at least each term's document count (`dfs`)."""
    scored = []
    for lexeme, tf in terms.items():
        df = dfs[lexeme]
        if df:
            n = max(live, df)
            scored.append((max(1, tf) * math.log1p((n - df + 0.5) / (df + 0.5)), lexeme))
    scored.sort(key=lambda st: (-st[0], st[1]))
    chosen = scored[:LIKE_MAX_TERMS + 1]  # Tantivy keeps one term more than it is asked
    best = chosen[0][0] if chosen and chosen[0][0] > 0 else 1.0
    return tantivy.Query.boolean_query([
        (tantivy.Occur.Should, tantivy.Query.boost_query(
            tantivy.Query.term_query(SCHEMA, TEXT, lexeme, index_option="basic"), score / best))
        for score, lexeme in chosen])


def _top(searcher: tantivy.Searcher, query: tantivy.Query, k: int, *,
         floor: float | None = None) -> list[Hit]:
    """The k best rows of `query` as hits, best first, ties by id. Tantivy breaks ties by
    document address: where a tie crosses the cut, the search widens until every row tied
    with the k-th is in; or, when the tie is at `floor` (the least score any match has: a
    constant-score query's), the tied rows are taken in id order from Tantivy instead (a
    near-spelling of a common word ties thousands of rows: widening read them all)."""
    hits = searcher.search(query, k + 1, count=False).hits
    if len(hits) > k and hits[k][0] == hits[k - 1][0]:
        tied = _tied_at_floor(searcher, query, hits[:k], k) if floor == hits[k - 1][0] else None
        if tied is not None:
            hits = tied
        else:
            n = 2 * k
            while True:
                hits = searcher.search(query, n + 1, count=False).hits
                if len(hits) <= n or hits[n][0] < hits[k - 1][0]:
                    break
                n *= 2
    if not hits:
        return []
    addresses = [address for _, address in hits]
    his = searcher.fast_field_values(ID_HI, addresses)
    los = searcher.fast_field_values(ID_LO, addresses)
    out = [Hit(id_from_halves(int(hi or 0), int(lo or 0)), float(score))
           for (score, _), hi, lo in zip(hits, his, los, strict=True)]
    return sorted(out, key=lambda h: (-h.score, h.id))[:k]


def _tied_at_floor(searcher: tantivy.Searcher, query: tantivy.Query,
                   best: list[tuple[float, tantivy.DocAddress]],
                   k: int) -> list[tuple[float, tantivy.DocAddress]] | None:
    """The k best (score, address) of a query whose k-th best score is the least any match
    has, the rows tied there taken by id: the rows above it (all in `best`), then the matches
    in ascending id order (Tantivy's order by the id's high half) that are not among them.
    None when two ids share their high half at the cut (then the caller widens instead)."""
    floor = best[-1][0]
    above = [(score, address) for score, address in best if score > floor]
    taken = {(a.segment_ord, a.doc) for _, a in above}
    by_id = searcher.search(query, k + 1, count=False, order_by_field=ID_HI,
                            order=tantivy.Order.Asc).hits
    out = list(above)
    last = -1
    for high, address in by_id:
        if (address.segment_ord, address.doc) in taken:
            continue
        if len(out) == k:  # the first tied row left out must not share the last one's half
            return out if high != last else None
        out.append((floor, address))
        last = high
    return out  # (k + 1 rows by id hold a tied row beyond the cut: here every match is in)
