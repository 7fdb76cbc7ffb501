"""`PartSearcher` on Postgres: BM25, trigram, dense and exact channels over searchable rows.

A searchable row is a visible part, or a visible first-class object without visible parts; filters
and scope judge its promoted object (see `pipeline.retrieval.store.filters`). Every query names the
namespace, so no channel can return another tenant's row, and every statement runs unprepared
(`prepare=False`) so Postgres plans it for its actual namespace and filter. The statements are in
`search_sql.py`, beside this module.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import numpy as np
from psycopg_pool import AsyncConnectionPool

from pipeline.domain import bm25
from pipeline.domain.read_model import Filters, Hit, RowMeta
from pipeline.postgres.pool import READ_HNSW_EF_SEARCH, AsyncConn, read_connection
from pipeline.retrieval.store import search_sql
from pipeline.retrieval.store.filters import (
    LOG_SCAN_ROWS,
    MAX_WHERE_ROOTS,
    Query,
    lagging_roots,
    passing_roots,
    searchable,
)

# Lists the promoted objects of a namespace passing a filter's `where` as a lexical replica
# holds them, at most cap + 1, with the replica's change log cursor (xid, id); None: cannot
# say (`TantivySearcher.where_roots`).
WhereRoots = Callable[[uuid.UUID, Filters, int],
                      Awaitable[tuple[list[uuid.UUID], tuple[int, int]] | None]]

_HNSW_MAX_EF = 1000  # pgvector's upper bound for hnsw.ef_search
# A range search's first HNSW fetch, and its growth while every row fetched is within the range.
_RANGE_FIRST_FETCH = 100
_RANGE_GROWTH = 4


class PgPartSearcher:
    """The candidate channels of the retrieval engine, over one Postgres database.

    - lexical: exact BM25 top k over the postings, no candidate bound; MaxScore skips the
      rows that cannot reach the top k (first pass over the rarest terms, at most
      `maxscore_budget` matching rows); N, mean length and df come from
      `bm25.StatsCache` (`stats_ttl` seconds).
    - trigram: query words unknown to the namespace's vocabulary, matched to its near words
      (`pg_trgm` similarity >= `trigram_threshold`), and the rows holding those; at most
      `trigram_max_words` query words (the longest) are near-matched.
    - dense: cosine; HNSW with iterative scan, or an exact scan when at most
      `exact_dense_threshold` rows pass the namespace, filters and scope.
    """

    def __init__(self, pool: AsyncConnectionPool[AsyncConn], *, k1: float = bm25.DEFAULT_K1,
                 b: float = bm25.DEFAULT_B, stats_ttl: float = 30.0,
                 trigram_threshold: float = 0.3, trigram_expand: int = 8,
                 trigram_row_cap: int = 1000, trigram_max_words: int = 16,
                 exact_dense_threshold: int = 2000,
                 lexeme_cache_size: int = 1024, maxscore_budget: int = 2000) -> None:
        self.pool = pool
        self.params = bm25.BM25Params(k1=k1, b=b)
        self.stats = bm25.StatsCache(stats_ttl)
        self.trigram_threshold = trigram_threshold
        self.trigram_expand = trigram_expand
        self.trigram_row_cap = trigram_row_cap
        self.trigram_max_words = trigram_max_words
        self.exact_dense_threshold = exact_dense_threshold
        self._lexeme_cache: OrderedDict[str, list[str]] = OrderedDict()
        self._lexeme_flights: dict[str, asyncio.Future[list[str]]] = {}
        self._lexeme_cache_size = lexeme_cache_size
        self.maxscore_budget = maxscore_budget
        # lexical searches that scored fewer rows than all matching ones (MaxScore)
        self.maxscore_pruned = 0
        # times HNSW fell short and the exact scan answered instead (for metrics and tests)
        self.dense_fallbacks = 0
        # where the objects passing a `where` are listed first, when set (the host's Tantivy
        # replica: its properties are fast fields, where Postgres reads every object's jsonb)
        self.where_roots_index: WhereRoots | None = None

    async def _fetch(self, conn: AsyncConn, query: Query,
                     params: dict[str, Any]) -> list[tuple[Any, ...]]:
        cur = await conn.execute(query, params, prepare=False)
        rows: list[tuple[Any, ...]] = await cur.fetchall()
        return rows

    @staticmethod
    def _hits(rows: Sequence[tuple[Any, ...]]) -> list[Hit]:
        return [Hit(row[0], float(row[1])) for row in rows if not math.isnan(float(row[1]))]

    # -- lexical (BM25) -----------------------------------------------------------------------

    async def query_lexemes(self, query: str) -> list[str]:
        """The distinct lexemes Postgres derives from `query` (as it does for `lexical`); one
        read however many channels ask at once (a search's lexical and near-spelling channels
        ask together)."""
        cached = self._lexeme_cache.get(query)
        if cached is not None:
            self._lexeme_cache.move_to_end(query)
            return cached
        flight = self._lexeme_flights.get(query)
        if flight is None:
            flight = asyncio.ensure_future(self._read_lexemes(query))
            self._lexeme_flights[query] = flight
            flight.add_done_callback(lambda _: self._lexeme_flights.pop(query, None))
        # shielded: a caller that gives up does not cancel the read the others wait on
        return await asyncio.shield(flight)

    async def _read_lexemes(self, query: str) -> list[str]:
        async with read_connection(self.pool) as conn:
            rows = await self._fetch(conn, search_sql.QUERY_LEXEMES, {"q": query})
        lexemes = list(rows[0][0])
        self._lexeme_cache[query] = lexemes
        while len(self._lexeme_cache) > self._lexeme_cache_size:
            self._lexeme_cache.popitem(last=False)
        return lexemes

    async def corpus(self, conn: AsyncConn, namespace: uuid.UUID) -> bm25.CorpusStats:
        """N and mean length of the namespace's searchable rows (cached `stats_ttl` seconds)."""
        cached = self.stats.corpus(namespace)
        if cached is not None:
            return cached
        base = searchable(namespace)
        rows = await self._fetch(conn, search_sql.over_searchable(search_sql.CORPUS, base.where),
                                 base.params)
        corpus = bm25.CorpusStats(int(rows[0][0]), float(rows[0][1]))
        self.stats.put(namespace, corpus, {})
        return corpus

    async def document_frequencies(self, conn: AsyncConn, namespace: uuid.UUID,
                                   lexemes: Sequence[str]) -> dict[str, int]:
        """df of each lexeme over the namespace's searchable rows: its number of postings
        (cached `stats_ttl` s)."""
        dfs = self.stats.dfs(namespace, lexemes)
        missing = [lex for lex in lexemes if lex not in dfs]
        if not missing:
            return dfs
        rows = await self._fetch(conn, search_sql.DOCUMENT_FREQUENCIES,
                                 {"ns": namespace, "terms": missing})
        fresh = {lex: 0 for lex in missing} | {str(r[0]): int(r[1]) for r in rows}
        # A df of 0 is not remembered: it would hide for `stats_ttl` a word written after a
        # search for it, or every word after the postings were rebuilt (`brainstream migrate`
        # with LEXICAL_ENGINE=postgres over a database that did not keep them); asking again
        # is one index probe.
        self.stats.put(namespace, None, {lex: df for lex, df in fresh.items() if df})
        return dfs | fresh

    async def search_lexical(self, namespace: uuid.UUID, query: str, filters: Filters,
                             scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Top k by BM25 over the distinct query lexemes (OR), ties by id."""
        if k <= 0:
            return []
        return await self.search_lexemes(namespace, await self.query_lexemes(query), filters,
                                         scope_ids, k)

    async def search_like(self, namespace: uuid.UUID, terms: Mapping[str, int],
                          filters: Filters, scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """More like this: top k by BM25 over the `bm25.LIKE_MAX_TERMS` most distinctive of a
        document's lexemes (`terms`: lexeme -> its frequency in the document; tf x idf)."""
        if k <= 0 or not terms:
            return []
        async with read_connection(self.pool) as conn:
            corpus = await self.corpus(conn, namespace)
            dfs = await self.document_frequencies(conn, namespace, sorted(terms))
        chosen = bm25.distinctive_terms(terms, dfs, corpus.n_docs, bm25.LIKE_MAX_TERMS)
        return await self.search_lexemes(namespace, chosen, filters, scope_ids, k)

    async def search_lexemes(self, namespace: uuid.UUID, lexemes: Sequence[str],
                             filters: Filters, scope_ids: Sequence[uuid.UUID],
                             k: int) -> list[Hit]:
        """Top k by BM25 over `lexemes` (OR), ties by id."""
        if k <= 0 or not lexemes:
            return []
        frag = searchable(namespace, filters, scope_ids)
        async with read_connection(self.pool) as conn:
            corpus = await self.corpus(conn, namespace)
            dfs = await self.document_frequencies(conn, namespace, lexemes)
            terms = [lex for lex in lexemes if dfs[lex] > 0]
            if not terms:
                return []
            idfs = {t: bm25.idf(corpus.n_docs, dfs[t]) for t in terms}
            query_sql = search_sql.over_searchable(search_sql.BM25, frag.where)
            # Postings exist only for searchable rows: without filters or scope, the k best
            # candidates all pass unless rows changed meanwhile (then the query runs unbounded).
            bounded = 4 * k if filters.empty and not scope_ids else None

            async def run(essential: Sequence[str], floor: float) -> list[tuple[Any, ...]]:
                rest = [t for t in terms if t not in essential]
                params = {**frag.params, "terms": terms, "idfs": [idfs[t] for t in terms],
                          "essential": [t in essential for t in terms], "ess": list(essential),
                          "rest": rest, "floor": floor, "tighten": bounded is not None,
                          "slack": sum(bm25.upper_bound(idfs[t], self.params) for t in rest),
                          "k1": self.params.k1, "b": self.params.b,
                          "avgdl": bm25.safe_avg_len(corpus.avg_len), "k": k}
                rows = await self._fetch(conn, query_sql, {**params, "inner": bounded})
                if bounded is not None and len(rows) < k:
                    rows = await self._fetch(conn, query_sql, {**params, "inner": None})
                return rows

            # MaxScore (see pipeline.domain.bm25): score the rows of the rarest terms first;
            # their k-th score tells which terms a top-k row must hold, and how much.
            first = bm25.rarest_terms({t: dfs[t] for t in terms}, self.maxscore_budget)
            if len(first) == len(terms):
                return self._hits(await run(terms, -math.inf))
            rows = await run(first, -math.inf)
            if len(rows) < k:
                return self._hits(await run(terms, -math.inf))
            self.maxscore_pruned += 1
            theta = float(rows[k - 1][1])
            essential = bm25.essential_terms(idfs, theta, self.params)
            if set(essential) <= set(first):
                return self._hits(rows)  # the first pass saw every row that can make the top k
            slack = sum(bm25.upper_bound(idfs[t], self.params) for t in terms
                        if t not in essential)
            rows = await run(essential, theta - slack - 1e-9 * max(1.0, abs(theta)))
        return self._hits(rows)

    # -- trigram -------------------------------------------------------------------------------

    async def search_trigram(self, namespace: uuid.UUID, query: str, filters: Filters,
                             scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Near-spellings: rows holding words of the namespace's vocabulary that are similar
        (pg_trgm `similarity` >= `trigram_threshold`) to query words the vocabulary does not
        know (misspellings, variant codes; known words are the lexical channel's).

        Each unknown query word (a lexeme of at least 3 characters) takes its `trigram_expand`
        most similar vocabulary words; a row scores the mean over the unknown words of the best
        similarity among the near words it holds (so in (0, 1]); ties by id. Each near word
        contributes at most `trigram_row_cap` rows (the lowest ids), which bounds the cost
        when a misspelling is near a very common word; only the `trigram_max_words` longest
        query words are near-matched (the fan-out of one request is bounded). The vocabulary
        is refreshed by the worker's sweep (`pipeline.lexical.vocab`), so a word first written
        seconds ago may not be near-matched yet.
        """
        frag = searchable(namespace, filters, scope_ids)  # invalid filters fail, even on no words
        if k <= 0 or not query.strip():
            return []
        words = [w for w in await self.query_lexemes(query) if len(w) >= 3]
        # Each word is a trigram scan of the vocabulary and up to `trigram_expand` x
        # `trigram_row_cap` rows: the longest (the most specific) bound the fan-out.
        words = sorted(words, key=lambda w: (-len(w), w))[: self.trigram_max_words]
        if not words:
            return []
        async with read_connection(self.pool) as conn, conn.transaction():
            await conn.execute(search_sql.TRIGRAM_THRESHOLD, (str(self.trigram_threshold),),
                               prepare=False)
            near = await self._fetch(conn, search_sql.NEAR_WORDS, {
                "ns": namespace, "words": words, "m": self.trigram_expand})
            unknown = {str(r[0]) for r in near if not r[3]}
            pairs = [(str(r[0]), str(r[1]), float(r[2])) for r in near
                     if str(r[0]) in unknown and r[1] is not None]
            if not pairs:
                return []
            statement = search_sql.over_searchable(search_sql.TRIGRAM_ROWS, frag.where)
            rows = await self._fetch(conn, statement, {
                **frag.params, "qw": [p[0] for p in pairs],
                "word": [p[1] for p in pairs],
                "sim": [p[2] for p in pairs], "n": len(unknown), "cap": self.trigram_row_cap,
                "k": k})
        return self._hits(rows)

    # -- dense ---------------------------------------------------------------------------------

    async def search_dense(self, namespace: uuid.UUID, vector: Sequence[float],
                           filters: Filters, scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Top k by cosine similarity (1 - cosine distance), ties by id.

        When at most `exact_dense_threshold` rows pass (a bounded count; unfiltered, the
        cached number of searchable rows), they are all scored exactly; otherwise HNSW with
        `relaxed_order` iterative scan fetches 2k candidates re-sorted by exact distance, and an
        HNSW answer short of k falls back to the exact scan.
        """
        vec = np.asarray(vector, dtype=np.float32)
        if k <= 0 or vec.size == 0 or not np.any(vec):
            return []
        fetch = min(max(2 * k, 40), _HNSW_MAX_EF)
        async with read_connection(self.pool) as conn:
            frag = searchable(namespace, filters, scope_ids,
                              await self._where_roots(conn, namespace, filters))
            params = {**frag.params, "v": vec, "k": k}
            exact = search_sql.over_embedded(search_sql.DENSE_EXACT, frag.where)
            if filters.empty and not scope_ids:
                # the namespace's searchable rows (cached with the BM25 statistics) bound it
                passing = (await self.corpus(conn, namespace)).n_docs
                if passing <= self.exact_dense_threshold:
                    return self._hits(await self._fetch(conn, exact, params))
            else:
                rows = await self._fetch(
                    conn, search_sql.over_embedded(search_sql.DENSE_EXACT_IF_FEW, frag.where),
                    {**params, "bound": self.exact_dense_threshold + 1})
                passing = int(rows[0][0])
                if passing <= self.exact_dense_threshold:
                    return self._hits([r[1:] for r in rows if r[1] is not None])
            approx = search_sql.over_embedded(search_sql.DENSE_APPROX, frag.where)
            if fetch == READ_HNSW_EF_SEARCH:  # the session's own walk (SESSION_OPTIONS)
                hits = self._hits(await self._fetch(conn, approx, {**params, "fetch": fetch}))
            else:
                async with conn.transaction():
                    await conn.execute(search_sql.HNSW_SETTINGS, (str(fetch),), prepare=False)
                    hits = self._hits(await self._fetch(conn, approx,
                                                        {**params, "fetch": fetch}))
            if len(hits) < min(k, passing):
                # HNSW gave up early (hnsw.max_scan_tuples): never starve, score exactly.
                self.dense_fallbacks += 1
                hits = self._hits(await self._fetch(conn, exact, params))
        return hits

    async def _where_roots(self, conn: AsyncConn, namespace: uuid.UUID, filters: Filters
                           ) -> list[uuid.UUID] | None:
        """The promoted objects passing a narrow `where`, so that the dense channel's passing
        count and exact scan read their rows alone: the planner cannot see how few pass a
        jsonpath test, and chose to sort every vector of 100k parts (EXPLAIN, 1% range: 300 ms
        against 8 ms unfiltered). None without a `where`, or when more than the cap pass.

        Listed by `where_roots_index` when it can say (under 1 ms at 100k parts, where testing
        every object's properties here takes 3.5-5 ms, growing with the namespace), corrected
        by the objects the replica has not caught up with (its change log beyond its cursor,
        tested here): the answer is Postgres's, a `wait: true` write included."""
        listing = passing_roots(namespace, filters)
        if listing is None:
            return None
        listed = None if self.where_roots_index is None else await self.where_roots_index(
            namespace, filters, MAX_WHERE_ROOTS)
        if listed is not None:
            roots, cursor = listed
            if len(roots) > MAX_WHERE_ROOTS:
                return None
            lagging = lagging_roots(namespace, filters, cursor)
            rows = await self._fetch(conn, lagging.where, lagging.params)
            if rows[0][0] < LOG_SCAN_ROWS:  # else: far behind, test every object here
                changed = {r[1] for r in rows if r[1] is not None}
                found = [r for r in roots if r not in changed] + [r[1] for r in rows if r[2]]
                return found if len(found) <= MAX_WHERE_ROOTS else None
        found = [r[0] for r in await self._fetch(conn, listing.where, listing.params)]
        return found if len(found) <= MAX_WHERE_ROOTS else None

    async def search_dense_within(self, namespace: uuid.UUID, vector: Sequence[float],
                                  min_score: float, filters: Filters,
                                  scope_ids: Sequence[uuid.UUID], cap: int
                                  ) -> tuple[list[Hit], bool]:
        """Range search: every row whose cosine similarity reaches `min_score`, best first, ties
        by id, at most `cap` of them; and whether more reach it (the answer was cut).

        Exact when at most `exact_dense_threshold` rows pass (as `search_dense`). Otherwise
        HNSW with iterative scan fetches the nearest rows, `_RANGE_FIRST_FETCH` first and
        `_RANGE_GROWTH` times more while every row fetched is still within the range (up to
        cap + 1): a tight range (near-duplicates) costs one small scan, not the whole set.
        """
        vec = np.asarray(vector, dtype=np.float32)
        if cap <= 0 or vec.size == 0 or not np.any(vec):
            return [], False
        frag = searchable(namespace, filters, scope_ids)
        params = {**frag.params, "v": vec, "maxd": 1.0 - min_score}
        async with read_connection(self.pool) as conn, conn.transaction():
            rows = await self._fetch(
                conn, search_sql.over_embedded(search_sql.DENSE_PASSING, frag.where),
                {**frag.params, "bound": self.exact_dense_threshold + 1})
            passing = int(rows[0][0])
            exact = search_sql.over_embedded(search_sql.DENSE_WITHIN_EXACT, frag.where)
            if passing <= self.exact_dense_threshold:
                hits = self._hits(await self._fetch(conn, exact, {**params, "k": cap + 1}))
                return hits[:cap], len(hits) > cap
            approx = search_sql.over_embedded(search_sql.DENSE_APPROX, frag.where)
            fetch = min(_RANGE_FIRST_FETCH, cap + 1)
            while True:
                await conn.execute(search_sql.HNSW_SETTINGS, (str(min(fetch, _HNSW_MAX_EF)),),
                                   prepare=False)
                found = self._hits(await self._fetch(conn, approx,
                                                     {**params, "fetch": fetch, "k": fetch}))
                within = [h for h in found if h.score >= min_score]
                if len(within) < len(found) or fetch > cap:
                    break
                if len(found) < min(fetch, passing):
                    # HNSW gave up early (hnsw.max_scan_tuples): score the range exactly
                    self.dense_fallbacks += 1
                    within = self._hits(await self._fetch(conn, exact, {**params, "k": cap + 1}))
                    break
                fetch = min(fetch * _RANGE_GROWTH, cap + 1)
        return within[:cap], len(within) > cap

    # -- exact ---------------------------------------------------------------------------------

    async def exact_matches(self, namespace: uuid.UUID, query: str, filters: Filters,
                            scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Rows whose id or promoted id is the query (score 4), whose promoted title equals it
        case-insensitively (3), whose promoted object has a top-level property value (or list
        element) equal to it as text (2), or that contain every quoted phrase (1); best first,
        ties by id. A query that is one quoted string is also compared without its quotes."""
        text = query.strip()
        if k <= 0 or not text:
            return []
        frag = searchable(namespace, filters, scope_ids)
        query_sql, params = search_sql.exact_query(text, frag, k)
        async with read_connection(self.pool) as conn:
            return self._hits(await self._fetch(conn, query_sql, params))

    # -- row meta ------------------------------------------------------------------------------

    async def row_meta(self, namespace: uuid.UUID, ids: Sequence[uuid.UUID]
                       ) -> dict[uuid.UUID, RowMeta]:
        """The parent of each searchable row among `ids` and when its promoted object last
        changed; other ids are absent."""
        if not ids:
            return {}
        frag = searchable(namespace)
        query_sql = search_sql.over_searchable(search_sql.ROW_META, frag.where)
        async with read_connection(self.pool) as conn:
            rows = await self._fetch(conn, query_sql, {**frag.params, "ids": list(ids)})
        return {r[0]: RowMeta(r[0], r[1], r[2]) for r in rows}
