"""The statements of the search channels (`PgPartSearcher` in `search.py`), beside it.

Templates name the searchable rows as `{from_}` and the namespace, filter and scope condition as
`{where}` (`pipeline.retrieval.store.filters.searchable`); values are placeholders only.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from psycopg import sql

from pipeline.retrieval.store.filters import SEARCHABLE_FROM, Fragment, Query

_PHRASE_RE = re.compile(r'"([^"]+)"')


def over_searchable(template: sql.SQL, where: Query) -> sql.Composed:
    """`template` over the searchable rows (`{from_}`) that pass `where` (`{where}`)."""
    return template.format(from_=SEARCHABLE_FROM, where=where)


QUERY_LEXEMES = sql.SQL(
    "SELECT coalesce(array_agg(DISTINCT l ORDER BY l), '{}')"
    " FROM unnest(tsvector_to_array(to_tsvector('english'::regconfig, %(q)s))) AS l")

# BM25 over the postings (`search_postings`, migration 0008): one term's contribution to a row.
_TERM = ("q.idf * sp.tf * (%(k1)s::float8 + 1) / (sp.tf + %(k1)s::float8"
         " * (1 - %(b)s::float8 + %(b)s::float8 * sp.doc_len / %(avgdl)s::float8))")

# MaxScore over postings: rows holding an `essential` term get their partial score from those
# terms' postings (index-only scans); rows whose partial score cannot reach the top k even with
# every other term at its upper bound are dropped (`floor`, from an earlier pass; and, without
# filters or scope, `kth`: a row's final score is at least its partial one, so the k-th best
# partial score is a score k rows reach); the rest add the other terms' contributions by
# primary-key probes; the best `inner` go on to the namespace, filters and
# scope (NULL: all of them). Scores are rounded to 1e-9: the sums' terms come in whatever order
# the join yields them, and equal rows must tie exactly (then order by id) in any database, or
# a replayed generation, whose rows sit in another physical order, would rank ties differently.
BM25 = sql.SQL(
    "WITH q(term, idf, essential) AS (SELECT * FROM unnest(%(terms)s::text[],"
    " %(idfs)s::float8[], %(essential)s::bool[])),"
    " cand AS (SELECT sp.row_id, sum(" + _TERM + ") AS partial"
    " FROM search_postings sp JOIN q ON q.term = sp.lexeme AND q.essential"
    " WHERE sp.namespace_id = %(ns)s AND sp.lexeme = ANY(%(ess)s::text[])"
    " GROUP BY sp.row_id HAVING sum(" + _TERM + ") > %(floor)s::float8),"
    " kth AS (SELECT CASE WHEN %(tighten)s AND count(*) >= %(k)s THEN min(partial) END AS v"
    " FROM (SELECT partial FROM cand ORDER BY partial DESC LIMIT %(k)s) AS t),"
    " kept AS (SELECT c.row_id, c.partial FROM cand c, kth WHERE kth.v IS NULL"
    " OR c.partial > kth.v - %(slack)s::float8 - 1e-9 * greatest(1, abs(kth.v))),"
    " scored AS (SELECT c.row_id, round((c.partial + coalesce((SELECT sum(" + _TERM + ")"
    " FROM search_postings sp JOIN q ON q.term = sp.lexeme AND NOT q.essential"
    " WHERE sp.namespace_id = %(ns)s AND sp.lexeme = ANY(%(rest)s::text[])"
    " AND sp.row_id = c.row_id), 0))::numeric, 9)::float8 AS score FROM kept c"
    " ORDER BY score DESC, c.row_id LIMIT %(inner)s)"
    " SELECT o.id, s.score FROM {from_} JOIN scored s ON s.row_id = o.id WHERE {where}"
    " ORDER BY s.score DESC, o.id LIMIT %(k)s")

# Per query word: whether the namespace's vocabulary holds it, and its most similar words
# (the `%` operator: trigram GIN index, pg_trgm.similarity_threshold set by the caller).
NEAR_WORDS = sql.SQL(
    "SELECT q.w, n.lexeme, n.sim, EXISTS (SELECT 1 FROM search_vocab v"
    " WHERE v.namespace_id = %(ns)s AND v.lexeme = q.w) AS known"
    " FROM unnest(%(words)s::text[]) AS q(w) LEFT JOIN LATERAL ("
    "SELECT v.lexeme, similarity(q.w, v.lexeme)::float8 AS sim FROM search_vocab v"
    " WHERE v.namespace_id = %(ns)s AND v.lexeme %% q.w"
    " ORDER BY similarity(q.w, v.lexeme) DESC, v.lexeme LIMIT %(m)s) AS n ON true")

# The similarity a vocabulary word needs to be near a query word (`%` above), this transaction.
TRIGRAM_THRESHOLD = sql.SQL("SELECT set_config('pg_trgm.similarity_threshold', %s, true)")

# Rows holding near words: per (query word, row) the best similarity, per row their sum over
# the unknown query words divided by their number.
TRIGRAM_ROWS = sql.SQL(
    "WITH e(qw, word, sim) AS (SELECT * FROM unnest(%(qw)s::text[], %(word)s::text[],"
    " %(sim)s::float8[])),"
    " r AS (SELECT h.id, e.qw, max(e.sim) AS sim FROM e CROSS JOIN LATERAL ("
    "SELECT o.id FROM search_postings sp JOIN {from_} ON o.id = sp.row_id"
    " WHERE sp.namespace_id = %(ns)s AND sp.lexeme = e.word AND {where}"
    " ORDER BY sp.row_id LIMIT %(cap)s)"
    " AS h GROUP BY h.id, e.qw)"
    " SELECT id, sum(sim) / %(n)s::float8 AS score FROM r GROUP BY id"
    " ORDER BY score DESC, id LIMIT %(k)s")

# N and mean length of the searchable rows (BM25's corpus statistics).
CORPUS = sql.SQL("SELECT count(*), coalesce(avg(o.doc_len), 0)::float8 FROM {from_} WHERE {where}")

# df of each term: its number of postings (postings exist only for searchable rows).
DOCUMENT_FREQUENCIES = sql.SQL(
    "SELECT lexeme, count(*) FROM search_postings WHERE namespace_id = %(ns)s"
    " AND lexeme = ANY(%(terms)s::text[]) GROUP BY lexeme")


# The searchable rows with their vectors (`object_embeddings`, migration 0033) as `e`; the HNSW
# index is on `e.embedding` of the rows without live parts (migration 0057: an object with live
# parts is not searchable), so the approximate plan walks it and joins the wide rows by id.
EMBEDDED_FROM = sql.SQL("object_embeddings e JOIN {} ON o.id = e.id").format(SEARCHABLE_FROM)


def over_embedded(template: sql.SQL, where: Query) -> sql.Composed:
    """`template` over the searchable rows with a vector (`{from_}`) that pass `where`."""
    return template.format(
        from_=EMBEDDED_FROM,
        where=sql.SQL("{} AND e.embedding IS NOT NULL AND NOT e.has_live_parts").format(where))


# Dense: the exact cosine top k of the rows passing {where} (the `+ 0` keeps it off the index).
DENSE_EXACT = sql.SQL(
    "SELECT o.id, 1 - (e.embedding <=> %(v)s) AS score FROM {from_} WHERE {where}"
    " ORDER BY (e.embedding <=> %(v)s) + 0, o.id LIMIT %(k)s")

# Dense range: the rows within cosine distance `maxd`, nearest first, exactly (at most k).
DENSE_WITHIN_EXACT = sql.SQL(
    "SELECT o.id, 1 - (e.embedding <=> %(v)s) AS score FROM {from_} WHERE {where}"
    " AND (e.embedding <=> %(v)s) <= %(maxd)s::float8"
    " ORDER BY (e.embedding <=> %(v)s) + 0, o.id LIMIT %(k)s")

# Dense, filtered: how many rows pass, counted up to `bound` (n), and, when fewer than `bound`
# pass, their exact cosine top k (one row of n alone when more pass: HNSW serves). One read of
# the passing rows where a count and then an exact scan read them twice.
DENSE_EXACT_IF_FEW = sql.SQL(
    "WITH p AS MATERIALIZED (SELECT o.id, e.embedding FROM {from_} WHERE {where}"
    " LIMIT %(bound)s), n AS (SELECT count(*) AS n FROM p)"
    " SELECT n.n, x.id, x.score FROM n LEFT JOIN LATERAL ("
    "SELECT p.id, 1 - (p.embedding <=> %(v)s) AS score FROM p WHERE n.n < %(bound)s"
    " ORDER BY p.embedding <=> %(v)s, p.id LIMIT %(k)s) AS x ON true")

# Dense: how many rows pass, counted up to a bound (is an exact scan cheap enough?).
DENSE_PASSING = sql.SQL(
    "SELECT count(*) FROM (SELECT 1 FROM {from_} WHERE {where} LIMIT %(bound)s) AS s")

# Dense: HNSW with iterative scan for this transaction, `fetch` candidates deep.
HNSW_SETTINGS = sql.SQL(
    "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
    " set_config('hnsw.ef_search', %s, true)")

# Dense: HNSW candidates, re-sorted by their exact distance.
DENSE_APPROX = sql.SQL(
    "WITH c AS MATERIALIZED (SELECT o.id, e.embedding <=> %(v)s AS d FROM {from_} WHERE {where}"
    " ORDER BY e.embedding <=> %(v)s LIMIT %(fetch)s)"
    " SELECT id, 1 - d AS score FROM c ORDER BY d + 0, id LIMIT %(k)s")

# Row meta: the parent of searchable rows and when their promoted object last changed (the
# decay's age); no text: the page's texts are read for the page alone.
ROW_META = sql.SQL(
    "SELECT o.id, o.parent_id, p.updated_at"
    " FROM {from_} WHERE {where} AND o.id = ANY(%(ids)s::uuid[])")


# The longest property value the GIN index of property values holds (migration 0035): a longer
# query is compared by the scan of every parent's properties (the same values, as text).
EXACT_PROPERTY_MAX = 256
_PROPERTY_INDEXED = sql.SQL("property_texts(t.properties) && %(needles)s::text[]")
_PROPERTY_SCAN = sql.SQL(
    "EXISTS (SELECT 1 FROM jsonb_each(t.properties) AS e"
    " WHERE CASE jsonb_typeof(e.value)"
    " WHEN 'array' THEN EXISTS (SELECT 1 FROM jsonb_array_elements(e.value) AS x"
    " WHERE jsonb_typeof(x) IN ('string', 'number', 'boolean')"
    " AND x #>> '{}' = ANY(%(needles)s::text[]))"
    " WHEN 'object' THEN false WHEN 'null' THEN false"
    " ELSE e.value #>> '{}' = ANY(%(needles)s::text[]) END)")


def exact_query(text: str, frag: Fragment, k: int) -> tuple[Query, dict[str, Any]]:
    """The exact-match statement for the stripped query `text` under `frag`, with its
    parameters (see `PgPartSearcher.exact_matches` for what matches and how it scores)."""
    needles = list(dict.fromkeys(
        [text] + ([text[1:-1].strip()] if len(text) > 2 and text[0] == text[-1] == '"'
                  and '"' not in text[1:-1] else [])))
    params: dict[str, Any] = {**frag.params, "needles": needles, "k": k}
    promoted = [sql.SQL(
        "SELECT t.id, 3 FROM objects t WHERE t.namespace_id = %(ns)s AND t.parent_id IS NULL"
        " AND lower(t.title) = ANY(ARRAY(SELECT lower(n) FROM unnest(%(needles)s::text[]) AS n))"),
        sql.SQL(
        "SELECT t.id, 2 FROM objects t WHERE t.namespace_id = %(ns)s AND t.parent_id IS NULL"
        " AND t.deleted_at IS NULL AND ")
        + (_PROPERTY_INDEXED if max(len(n) for n in needles) <= EXACT_PROPERTY_MAX
           else _PROPERTY_SCAN)]
    rows_sql: list[Query] = []
    ids = [_as_uuid(n) for n in needles]
    if any(ids):
        params["qids"] = [i for i in ids if i is not None]
        # the promoted arm covers the row itself and, for a parent, its parts
        promoted.append(sql.SQL("SELECT unnest(%(qids)s::uuid[]), 4"))
    phrases = [p.strip() for p in _PHRASE_RE.findall(text) if p.strip()]
    if phrases:
        holders = [sql.Placeholder(f"phrase_{i}") for i in range(len(phrases))]
        params |= {f"phrase_{i}": p for i, p in enumerate(phrases)}
        rows_sql.append(sql.SQL(
            "SELECT o.id, 1 FROM objects o WHERE o.namespace_id = %(ns)s"
            " AND o.lexical @@ ({})").format(sql.SQL(" && ").join(
                sql.SQL("phraseto_tsquery('english'::regconfig, {})").format(h)
                for h in holders)))
    hits = sql.SQL(" UNION ALL ").join([
        # ANY(ARRAY(...)) makes the parts an index lookup whatever pm's size estimate
        sql.SQL("SELECT o.id, pm.score FROM pm JOIN objects o ON o.parent_id = pm.id"
                " WHERE o.parent_id = ANY(ARRAY(SELECT id FROM pm))"),
        sql.SQL("SELECT pm.id, pm.score FROM pm"), *rows_sql])
    statement = sql.SQL(
        "WITH pm(id, score) AS ({promoted}), h(id, score) AS ({hits}),"
        " best AS (SELECT id, max(score) AS score FROM h GROUP BY id)"
        " SELECT o.id, best.score FROM {from_} JOIN best ON best.id = o.id WHERE {where}"
        " ORDER BY best.score DESC, o.id LIMIT %(k)s").format(
        promoted=sql.SQL(" UNION ALL ").join(promoted), hits=hits, from_=SEARCHABLE_FROM,
        where=frag.where)
    return statement, params


def _as_uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None
