"""The benchmark namespace's entity layer in bulk, for `python -m bench.query --ppr` at 100k parts.

The extraction stage (`pipeline/entities/stage.py`) runs the extractor at thousands of parts a
second but writes back at tens to a hundred rows a second on this machine, so 100k parts
through it take hours. `bulk_extract` runs the same extractor (`heuristic`) over the same
fields (`entities.store.extraction.load`, `stage.valid_mentions`) and writes what the
write-back writes for the PPR stage's reads, set-based:

- entities with the write-back's ids (`entity_id(namespace, norm)`), name and label of the first
  mention naming them, `part_count` = live rows naming them (the write-back's recount, one
  statement for the namespace);
- mentions (one per span, the first mention of a span wins) and aliases (surface forms and the
  extractor's), as `writeback._mentions` builds them;
- the rows marked extracted.

Not written, because the PPR stage does not read them: CO_OCCURS edges (the walk follows
RELATES and POSSIBLY_SAME only), RELATES (the heuristic extractor states no triples), entity
name embeddings, and the outbox entries that project entities into the graph.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import psycopg

from bench.harness.runenv import log
from bench.query.data import NAMESPACE
from pipeline.domain.mentions import Extraction, TextField
from pipeline.entities.extractors import build_extractor
from pipeline.entities.ids import entity_id
from pipeline.entities.names import normalise
from pipeline.entities.stage import EXTRACT_TEXT_CAP_CHARS, valid_mentions
from pipeline.entities.store import extraction as rows_sql
from pipeline.entities.store.extraction import RowText
from pipeline.settings import Settings

BATCH = 2000

_PART_COUNT = """
UPDATE entities e SET part_count = c.n, updated_at = now()
FROM (SELECT m.entity_id, count(DISTINCT m.row_id) AS n FROM mentions m
      JOIN objects o ON o.id = m.row_id AND o.deleted_at IS NULL
      WHERE m.namespace_id = %(ns)s GROUP BY m.entity_id) c
WHERE e.id = c.entity_id AND e.part_count <> c.n
"""


def pending_rows(settings: Settings) -> int:
    """Rows of the benchmark namespace waiting for extraction."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute("SELECT count(*) FROM entity_extraction WHERE namespace_id = %s"
                           " AND status = 'pending'", (NAMESPACE,)).fetchone()
    return int(row[0]) if row else 0


def bulk_extract(settings: Settings) -> tuple[int, float]:
    """Extract the namespace's pending rows with `heuristic` and write their entity layer in
    bulk (see the module docstring): (rows, seconds)."""
    extractor = build_extractor(settings.model_copy(update={"entity_extractor": "heuristic"}))
    started = time.perf_counter()
    rows = 0
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        pending = [r[0] for r in conn.execute(
            "SELECT row_id FROM entity_extraction WHERE namespace_id = %s"
            " AND status = 'pending' ORDER BY row_id", (NAMESPACE,)).fetchall()]
        for start in range(0, len(pending), BATCH):
            batch = rows_sql.load(conn, pending[start:start + BATCH],
                                  EXTRACT_TEXT_CAP_CHARS)
            found = extractor.extract([[TextField(name, text) for name, text in row.fields]
                                       for row in batch])
            with conn.transaction():
                _write(conn, [(row, valid_mentions(row, got))
                              for row, got in zip(batch, found, strict=True)])
            rows += len(batch)
            if start // BATCH % 10 == 9:
                log(f"bulk extraction: {rows} of {len(pending)} rows")
        conn.execute(_PART_COUNT, {"ns": NAMESPACE})
        for table in ("entities", "mentions", "entity_aliases", "entity_extraction"):
            conn.execute(f"VACUUM (ANALYZE) {table}")
    return rows, time.perf_counter() - started


def _write(conn: psycopg.Connection[Any], extracted: list[tuple[RowText, Extraction]]) -> None:
    entities: dict[str, tuple[str, str]] = {}
    mentions: dict[tuple[uuid.UUID, str, int, int], tuple[Any, ...]] = {}
    aliases: set[tuple[str, str, uuid.UUID, str]] = set()
    for row, found in extracted:
        for m in found.mentions:
            norm = normalise(m.name)
            entities.setdefault(norm, (m.name.strip(), m.label))
            eid = entity_id(NAMESPACE, norm)
            mentions.setdefault((row.id, m.field, m.start, m.end), (
                row.id, m.field, m.start, m.end, NAMESPACE, eid, m.label, m.text))
            for alias, source in [(m.text, "surface"), (m.name, "surface"),
                                  *((a, "extractor") for a in m.aliases)]:
                alias_norm = normalise(alias)
                if alias_norm:
                    aliases.add((alias_norm, alias.strip(), eid, source))
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS bulk_entities (id uuid, name text, norm text,"
                 " label text) ON COMMIT DELETE ROWS")
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS bulk_aliases (norm text, alias text,"
                 " entity_id uuid, source text) ON COMMIT DELETE ROWS")
    with conn.cursor() as cur:
        with cur.copy("COPY bulk_entities FROM STDIN") as copy:
            for norm, (name, label) in entities.items():
                copy.write_row((entity_id(NAMESPACE, norm), name, norm, label))
        cur.execute("INSERT INTO entities (id, namespace_id, name, norm, label)"
                    " SELECT id, %s, name, norm, label FROM bulk_entities ORDER BY id"
                    " ON CONFLICT DO NOTHING", (NAMESPACE,))
        with cur.copy("COPY mentions (row_id, field, start_pos, end_pos, namespace_id,"
                      " entity_id, label, text) FROM STDIN") as copy:
            for mention in mentions.values():
                copy.write_row(mention)
        with cur.copy("COPY bulk_aliases FROM STDIN") as copy:
            for alias in aliases:
                copy.write_row(alias)
        cur.execute("INSERT INTO entity_aliases (namespace_id, norm, alias, entity_id, source)"
                    " SELECT DISTINCT ON (norm, entity_id) %s, norm, alias, entity_id, source"
                    " FROM bulk_aliases ORDER BY norm, entity_id, alias, source"
                    " ON CONFLICT DO NOTHING", (NAMESPACE,))
        cur.execute("UPDATE entity_extraction SET status = 'done', extracted_hash = text_hash,"
                    " extractor = 'heuristic', attempts = attempts + 1, updated_at = now()"
                    " WHERE row_id = ANY(%s)", ([row.id for row, _ in extracted],))
