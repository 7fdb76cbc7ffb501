"""The read-path benchmark's data: SciFact sentences shuffled into new documents (seeded, unique
titles), chunked by the pipeline's chunker and embedded with the static embedder, loaded in bulk
(binary COPY, indexes and postings rebuilt after), linked, and projected into FalkorDB by the
real `OutboxRelay`. Each scale grows the one namespace cumulatively.
"""

from __future__ import annotations

import random
import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb

from bench.harness.inprocess import drain_outbox
from bench.harness.runenv import DATASETS, log, read_jsonl
from pipeline.domain.chunking import chunk_text, count_tokens, part_id
from pipeline.domain.index_text import (
    CONTENT_CAP_CHARS,
    entity_index_text,
    part_index_text,
    text_hash,
)
from pipeline.embedding.embedders.static import StaticEmbedder
from pipeline.lexical.postings_switch import postings_maintained
from pipeline.outbox.ops import EDGE_SYNC, NODE_SYNC
from pipeline.settings import Settings

NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "brainstream-bench/query")
KIND = "doc"
SOURCE = "bench.query"
RELATIONS = ("cites", "related")
LINKS_PER_DOC = 3
TARGET_PARTS_PER_DOC = 5
SEED = 20240601
_SENTENCE = re.compile(r"(?<=[.!?])\s+")

_COLUMNS = ("id", "namespace_id", "kind", "title", "content", "parent_id", "position", "chunked",
            "embedding", "index_text_hash", "embedded_hash", "embed_status", "event_id",
            "context_title")
_TYPES = ("uuid", "uuid", "text", "text", "text", "uuid", "int4", "bool", "vector", "text",
          "text", "text", "text", "text")
# The vector and its state go to `object_embeddings` (migration 0033), the rest to `objects`.
_EMBEDDING_COLUMNS = ("embedding", "embedded_hash", "embed_status")
_OBJECT_AT = [i for i, c in enumerate(_COLUMNS) if c not in _EMBEDDING_COLUMNS]
_PARENT_AT = _COLUMNS.index("parent_id")
_EMBEDDING_AT = [_COLUMNS.index(c) for c in ("id", "namespace_id", "parent_id",
                                              "index_text_hash", *_EMBEDDING_COLUMNS)]


# -- synthetic corpus --------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceText:
    """The raw material: SciFact titles, sentences and claims."""

    titles: list[str]
    sentences: list[str]
    claims: list[str]


def load_source() -> SourceText:
    """SciFact's titles and abstract sentences, and its 1,109 claims (the query texts)."""
    titles, sentences = [], []
    for row in read_jsonl(DATASETS / "scifact" / "corpus.jsonl.gz"):
        titles.append(str(row.get("title") or "untitled"))
        sentences += [s for s in _SENTENCE.split(str(row.get("text") or "")) if s]
    claims = [str(row["text"]) for row in read_jsonl(DATASETS / "scifact" / "queries.jsonl")]
    return SourceText(titles, sentences, claims)


@dataclass
class Doc:
    """One synthetic document and its chunks."""

    id: uuid.UUID
    title: str
    content: str
    chunks: list[str]


def make_docs(source: SourceText, start: int, parts_wanted: int, rng: random.Random
              ) -> list[Doc]:
    """Documents numbered from `start` until they hold at least `parts_wanted` parts."""
    docs: list[Doc] = []
    parts = 0
    number = start
    budget = 170 * TARGET_PARTS_PER_DOC  # a 200-token chunk with 30 overlap adds ~170 tokens
    while parts < parts_wanted:
        picked: list[str] = []
        tokens = 0
        while tokens < budget:
            sentence = rng.choice(source.sentences)
            picked.append(sentence)
            tokens += count_tokens(sentence)
        content = " ".join(picked)
        title = f"{rng.choice(source.titles)} (#{number})"
        oid = uuid.uuid5(NAMESPACE, f"doc:{number}")
        chunks = [c.text for c in chunk_text(content)]
        docs.append(Doc(oid, title, content, chunks))
        parts += len(chunks)
        number += 1
    return docs


# -- loading -------------------------------------------------------------------------------------


def object_rows(docs: Sequence[Doc], embedder: StaticEmbedder, settings: Settings
                ) -> list[tuple[Any, ...]]:
    """COPY rows: parents then parts, embedded as the embedding worker would embed them."""
    parent_texts = [entity_index_text(d.title, None, {}, d.content,
                                      content_cap_chars=CONTENT_CAP_CHARS) for d in docs]
    part_texts = [part_index_text(d.title, c) for d in docs for c in d.chunks]
    vectors = embedder.embed(parent_texts + part_texts)
    rows: list[tuple[Any, ...]] = []
    for doc, text, vector in zip(docs, parent_texts, vectors, strict=False):
        h = text_hash(text)
        rows.append((doc.id, NAMESPACE, KIND, doc.title, doc.content, None, None, False,
                     vector, h, h, "done", f"{SOURCE}:{doc.id}", None))
    i = len(docs)
    for doc in docs:
        for position, chunk in enumerate(doc.chunks):
            h = text_hash(part_texts[i - len(docs)])
            rows.append((part_id(NAMESPACE, doc.id, position), NAMESPACE, KIND, None, chunk,
                         doc.id, position, True, vectors[i], h, h, "done", f"{SOURCE}:{doc.id}",
                         doc.title))
            i += 1
    return rows


def load_rows(settings: Settings, rows: Sequence[tuple[Any, ...]],
              links: Sequence[tuple[uuid.UUID, str, uuid.UUID]], new_parents: Sequence[uuid.UUID]
              ) -> dict[str, float]:
    """COPY objects (indexes dropped and rebuilt), links and outbox rows; VACUUM ANALYZE."""
    times: dict[str, float] = {}
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        register_vector(conn)
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
            " AND tablename IN ('objects', 'object_embeddings')"
            " AND indexname NOT IN ('objects_pkey', 'object_embeddings_pkey')").fetchall()
        started = time.perf_counter()
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        # The postings trigger would insert each row's postings one by one; they are rebuilt
        # in bulk below by the function the trigger uses (migration 0009), without the primary
        # key meanwhile (one index build after the insert is faster than keeping it up to date).
        # A database that keeps no SQL postings (LEXICAL_ENGINE=tantivy) gets none.
        sql_postings = postings_maintained(conn)
        if sql_postings:
            conn.execute("ALTER TABLE objects DISABLE TRIGGER objects_postings_insert")
        # the rows come with their vectors: written directly, not made pending by the trigger
        conn.execute("ALTER TABLE objects DISABLE TRIGGER objects_embedding_insert")
        with conn.cursor() as cur, cur.copy(
                f"COPY objects ({', '.join(_COLUMNS[i] for i in _OBJECT_AT)})"
                " FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types([_TYPES[i] for i in _OBJECT_AT])
            for row in rows:
                copy.write_row([row[i] for i in _OBJECT_AT])
        # an object with live parts is never searched itself (migration 0057): its row says so,
        # as the insert trigger would have written it, or HNSW walks past it on every search
        with_parts = {row[_PARENT_AT] for row in rows if row[_PARENT_AT] is not None}
        with conn.cursor() as cur, cur.copy(
                "COPY object_embeddings (id, namespace_id, root_id, index_text_hash, embedding,"
                " embedded_hash, embed_status, has_live_parts) FROM STDIN (FORMAT BINARY)"
                ) as copy:
            copy.set_types(["uuid", "uuid", "uuid", "text", "vector", "text", "text", "bool"])
            for row in rows:
                oid, ns, parent, *rest = (row[i] for i in _EMBEDDING_AT)
                copy.write_row([oid, ns, parent or oid, *rest, oid in with_parts])
        # parents of an earlier load that got new parts now
        earlier = with_parts - {row[0] for row in rows}
        if earlier:
            conn.execute("SELECT brainstream_live_parts(%s)", (list(earlier),))
        conn.execute("ALTER TABLE objects ENABLE TRIGGER objects_embedding_insert")
        times["copy objects"] = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        for _, definition in indexes:
            conn.execute(definition)
        times["rebuild indexes"] = time.perf_counter() - started
        if sql_postings:
            started = time.perf_counter()
            conn.execute("ALTER TABLE objects ENABLE TRIGGER objects_postings_insert")
            conn.execute("ALTER TABLE search_postings DROP CONSTRAINT search_postings_pkey")
            conn.execute("SELECT brainstream_rebuild_postings(%s)", (NAMESPACE,))
            conn.execute("ALTER TABLE search_postings ADD PRIMARY KEY"
                         " (namespace_id, lexeme, row_id) INCLUDE (tf, doc_len)")
            conn.execute("VACUUM (ANALYZE) search_postings")
            times["search postings"] = time.perf_counter() - started
        started = time.perf_counter()
        with conn.cursor() as cur, cur.copy(
                "COPY links (namespace_id, from_id, relation_type, to_id, meta)"
                " FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["uuid", "uuid", "text", "uuid", "jsonb"])
            for from_id, rel, to_id in links:
                copy.write_row((NAMESPACE, from_id, rel, to_id,
                                Jsonb({"note": f"{rel} link for the benchmark"})))
        with conn.cursor() as cur, cur.copy(
                "COPY outbox (namespace_id, aggregate_id, op, payload)"
                " FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["uuid", "uuid", "text", "jsonb"])
            for pid in new_parents:
                copy.write_row((NAMESPACE, pid, NODE_SYNC, Jsonb({})))
            for from_id, rel, to_id in links:
                copy.write_row((NAMESPACE, from_id, EDGE_SYNC, Jsonb(
                    {"from": str(from_id), "relation_type": rel, "to": str(to_id)})))
        conn.execute("VACUUM (ANALYZE) objects")
        conn.execute("VACUUM (ANALYZE) object_embeddings")
        conn.execute("VACUUM (ANALYZE) links")
        times["links, outbox, vacuum"] = time.perf_counter() - started
        if sql_postings:
            started = time.perf_counter()
            # the COPY bypassed the trigger that queues rows for the vocabulary: fill it
            conn.execute("INSERT INTO search_vocab (namespace_id, lexeme)"
                         " SELECT DISTINCT o.namespace_id, l FROM objects o,"
                         " unnest(tsvector_to_array(o.lexical)) AS l WHERE o.namespace_id = %s"
                         " ORDER BY 1, 2 ON CONFLICT DO NOTHING", (NAMESPACE,))
            times["search vocabulary"] = time.perf_counter() - started
    return times


def part_count(settings: Settings) -> int:
    """Parts already stored in the benchmark namespace."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute("SELECT count(*) FROM objects WHERE namespace_id = %s"
                           " AND parent_id IS NOT NULL", (NAMESPACE,)).fetchone()
    return int(row[0]) if row else 0


def existing_parents(settings: Settings) -> list[tuple[uuid.UUID, str]]:
    """(id, title) of the stored documents, in load order."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        rows = conn.execute("SELECT id, title FROM objects WHERE namespace_id = %s"
                            " AND parent_id IS NULL ORDER BY created_at, id",
                            (NAMESPACE,)).fetchall()
    return [(r[0], r[1]) for r in rows]


def graph_and_link_counts(settings: Settings) -> tuple[int, int]:
    """(documents, links) of the benchmark namespace."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        docs = conn.execute("SELECT count(*) FROM objects WHERE namespace_id = %s"
                            " AND parent_id IS NULL", (NAMESPACE,)).fetchone()
        links = conn.execute("SELECT count(*) FROM links WHERE namespace_id = %s",
                             (NAMESPACE,)).fetchone()
    return int(docs[0]) if docs else 0, int(links[0]) if links else 0


def grow_to(settings: Settings, source: SourceText, parts: int, embedder: StaticEmbedder
            ) -> dict[str, float]:
    """Add documents until the namespace holds `parts` parts; timings of each step."""
    have = part_count(settings)
    if have >= parts:
        with psycopg.connect(settings.effective_postgres_dsn) as conn:
            row = conn.execute("SELECT count(*) FROM outbox WHERE done_at IS NULL"
                               " AND failed_at IS NULL").fetchone()
        if row and row[0]:  # an earlier run stopped during the projection: finish it first
            log(f"{row[0]} outbox rows from an earlier run: projecting them ...")
            return {"relay to FalkorDB (resumed)": drain_outbox(settings, rounds=20,
                                                                progress=True)}
        return {}
    known = existing_parents(settings)
    rng = random.Random(SEED + len(known))
    started = time.perf_counter()
    docs = make_docs(source, len(known), parts - have, rng)
    rows = object_rows(docs, embedder, settings)
    times = {"generate + embed (static)": time.perf_counter() - started}
    ids = [pid for pid, _ in known] + [d.id for d in docs]
    links: set[tuple[uuid.UUID, str, uuid.UUID]] = set()
    for doc in docs:
        for _ in range(LINKS_PER_DOC):
            target = rng.choice(ids)
            if target != doc.id:
                links.add((doc.id, rng.choice(RELATIONS), target))
    log(f"loading {len(docs)} documents, {len(rows) - len(docs)} parts, {len(links)} links")
    times |= load_rows(settings, rows, sorted(links), [d.id for d in docs])
    log("projecting into the graph (OutboxRelay) ...")
    times["relay to FalkorDB"] = drain_outbox(settings, rounds=20, progress=True)
    return times
