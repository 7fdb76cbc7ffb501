"""Tests that fill the entity layer by hand share the session's database with a live pipeline,
whose worker extracts the same rows (as fast as it embeds them): its write-back would replace the
hand-made mentions and recount the hand-made part counts. `hold_extraction` marks a namespace's
rows extracted and drops what the worker already wrote, so only the test writes them;
`extract_now` runs the real extraction stage over some roots in the test's own process."""

from __future__ import annotations

import uuid
from collections.abc import Collection

import psycopg

from pipeline.entities.extractors import build_extractor
from pipeline.entities.stage import ExtractionStage
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings


def hold_extraction(settings: Settings, namespace: uuid.UUID,
                    keep: Collection[str | uuid.UUID] = ()) -> None:
    """Mark every row of the namespace extracted, then drop its entities (and their mentions,
    aliases, edges, merges) except `keep`, the ones the test made. Marking first waits for a
    write-back in flight (it locks these rows) and makes any later one skip them."""
    kept = [uuid.UUID(str(k)) for k in keep]
    args = {"ns": namespace, "keep": kept}
    with psycopg.connect(settings.effective_postgres_dsn) as conn, conn.transaction():
        conn.execute("UPDATE entity_extraction SET status = 'done', extracted_hash = text_hash,"
                     " recount = false WHERE namespace_id = %(ns)s", args)
        conn.execute("DELETE FROM mentions WHERE namespace_id = %(ns)s"
                     " AND entity_id <> ALL(%(keep)s::uuid[])", args)
        conn.execute("DELETE FROM entity_merges WHERE namespace_id = %(ns)s", args)
        conn.execute("UPDATE entities SET merged_into = NULL WHERE namespace_id = %(ns)s"
                     " AND merged_into IS NOT NULL", args)
        conn.execute("DELETE FROM entities WHERE namespace_id = %(ns)s"
                     " AND id <> ALL(%(keep)s::uuid[])", args)  # aliases, edges cascade


def extract_now(settings: Settings, roots: Collection[str | uuid.UUID]) -> None:
    """The extraction stage over these roots' pending rows, now, with the configured extractor."""
    pool = make_pool(settings, max_size=2)
    try:
        ExtractionStage(settings, pool, build_extractor(settings)).run(
            roots=[uuid.UUID(str(r)) for r in roots])
    finally:
        pool.close()
