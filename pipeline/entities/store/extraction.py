"""The extraction stage's per-row state (`entity_extraction`, `entity_recount`): claiming rows
with a lease, loading the fields the extractor reads, marking them done or failed, and the
counts operators read. The entity writes are in `pipeline/entities/store/writes.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from pipeline.domain.structure import RowStructure, row_structure_from_json

Conn = psycopg.Connection[Any]

# The `topic` header of the stage's dead letters (they describe a row, not a record of a topic).
EXTRACTION_SOURCE = "extraction"

_CLAIM_PENDING = """
UPDATE entity_extraction SET lease_until = now() + make_interval(secs => %(lease)s)
WHERE row_id IN (
    SELECT row_id FROM entity_extraction
    WHERE status = 'pending' AND (lease_until IS NULL OR lease_until < now())
      AND (%(roots)s::uuid[] IS NULL OR root_id = ANY(%(roots)s::uuid[]))
    ORDER BY updated_at, row_id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
RETURNING row_id
"""

_CLAIM_RECOUNT = """
UPDATE entity_extraction SET lease_until = now() + make_interval(secs => %(lease)s)
WHERE row_id IN (
    SELECT row_id FROM entity_extraction
    WHERE recount AND status <> 'pending' AND (lease_until IS NULL OR lease_until < now())
      AND (%(roots)s::uuid[] IS NULL OR root_id = ANY(%(roots)s::uuid[]))
    ORDER BY row_id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
RETURNING row_id
"""

# A root's content is read only when it has no parts: otherwise its parts carry it.
_LOAD = """
SELECT o.id, o.namespace_id, coalesce(o.parent_id, o.id), o.parent_id IS NULL, o.title,
       o.summary, o.content, o.index_text_hash || coalesce('+' || s.digest, ''), o.event_id,
       EXISTS (SELECT 1 FROM objects p WHERE p.parent_id = o.id), s.structure
FROM objects o LEFT JOIN row_structure s ON s.row_id = o.id
WHERE o.id = ANY(%s) ORDER BY o.id
"""

@dataclass(frozen=True)
class RowText:
    """One claimed row as the stage reads it."""

    id: uuid.UUID
    namespace_id: uuid.UUID
    root_id: uuid.UUID
    text_hash: str | None
    event_id: str | None
    fields: tuple[tuple[str, str], ...]  # (field, text), the fields the extractor reads
    # what the put says the row mentions and states (migration 0053); None: the extractor reads
    supplied: RowStructure | None = None


@dataclass(frozen=True)
class Gone:
    """A hard-deleted row's former mentions (entity -> count), from `entity_recount`."""

    row_id: uuid.UUID
    root_id: uuid.UUID
    namespace_id: uuid.UUID
    mentions: dict[uuid.UUID, int]


# -- claiming and loading ------------------------------------------------------------------------


def claim(conn: Conn, *, recount: bool, lease: float, roots: Sequence[uuid.UUID] | None,
          limit: int) -> list[uuid.UUID]:
    """Lease up to `limit` rows that wait for an extraction (or, with `recount`, only for a
    recount after a soft delete or revival) and nobody holds."""
    rows = conn.execute(_CLAIM_RECOUNT if recount else _CLAIM_PENDING, {
        "lease": lease, "roots": list(roots) if roots is not None else None, "limit": limit,
    }).fetchall()
    return [row[0] for row in rows]


def load(conn: Conn, ids: Sequence[uuid.UUID], cap_chars: int) -> list[RowText]:
    """The claimed rows that still exist, with the fields the extractor reads (each cut at
    `cap_chars`; a prefix, so spans stay valid)."""
    out = []
    for (oid, ns, root, is_root, title, summary, content, hsh, event, has_parts,
         structure) in conn.execute(_LOAD, (list(ids),)).fetchall():
        texts = ([("title", title), ("summary", summary)]
                 + ([] if has_parts else [("content", content)]) if is_root
                 else [("content", content)])
        fields = tuple((name, text[:cap_chars]) for name, text in texts if text)
        supplied = None if structure is None else row_structure_from_json(oid, structure)
        out.append(RowText(oid, ns, root, hsh, event, fields, supplied))
    return out


def release(conn: Conn, ids: Sequence[uuid.UUID]) -> None:
    """Drop the lease of rows the stage gave back (their text changed meanwhile)."""
    if ids:
        conn.execute("UPDATE entity_extraction SET lease_until = NULL WHERE row_id = ANY(%s)",
                     (list(ids),))


def lock_rows(conn: Conn, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, tuple[str | None, str,
                                                                                int, bool]]:
    """Lock the rows' extraction state in id order: (text_hash, status, triples, recount)."""
    rows = conn.execute(
        "SELECT row_id, text_hash, status, triples, recount FROM entity_extraction"
        " WHERE row_id = ANY(%s) ORDER BY row_id FOR UPDATE", (sorted(ids),)).fetchall()
    return {row[0]: (row[1], row[2], row[3], row[4]) for row in rows}


def mark_done(conn: Conn, rows: Iterable[tuple[uuid.UUID, str | None, str, int]]) -> None:
    """(row, hash extracted, extractor, triples): extracted, the lease and any recount done. One
    statement for the batch (the rows are locked already, `lock_rows`)."""
    done = sorted(rows)
    if done:
        conn.execute(
            "UPDATE entity_extraction x SET status = 'done', extracted_hash = t.hsh,"
            " extractor = t.extractor, triples = t.triples, attempts = x.attempts + 1,"
            " lease_until = NULL, error = NULL, recount = false, updated_at = now()"
            " FROM unnest(%b::uuid[], %b::text[], %b::text[], %b::int[])"
            " AS t(row_id, hsh, extractor, triples) WHERE x.row_id = t.row_id",
            [list(column) for column in zip(*done, strict=True)])


def mark_recounted(conn: Conn, row_ids: Sequence[uuid.UUID]) -> None:
    if row_ids:
        conn.execute("UPDATE entity_extraction SET recount = false, lease_until = NULL"
                     " WHERE row_id = ANY(%s)", (sorted(row_ids),))


def mark_failed(conn: Conn, rows: Sequence[tuple[uuid.UUID, str | None]], error: str) -> int:
    """(row, hash read): failed, unless the text changed meanwhile; how many were marked."""
    with conn.cursor() as cur:
        cur.executemany(
            "UPDATE entity_extraction SET status = 'failed', error = %s,"
            " attempts = attempts + 1, lease_until = NULL, updated_at = now()"
            " WHERE row_id = %s AND status = 'pending' AND text_hash IS NOT DISTINCT FROM %s",
            [(error, rid, hsh) for rid, hsh in sorted(rows)], returning=False)
        return cur.rowcount


def take_gone(conn: Conn, limit: int) -> list[Gone]:
    """Remove up to `limit` hard-deleted rows from `entity_recount` (in the caller's
    transaction: they come back if it rolls back) and return their former mentions."""
    rows = conn.execute(
        "DELETE FROM entity_recount WHERE row_id IN (SELECT row_id FROM entity_recount"
        "   ORDER BY created_at, row_id LIMIT %s FOR UPDATE SKIP LOCKED)"
        " RETURNING row_id, root_id, namespace_id, entity_id, mentions", (limit,)).fetchall()
    out: dict[uuid.UUID, Gone] = {}
    for row_id, root, ns, entity, n in rows:
        out.setdefault(row_id, Gone(row_id, root, ns, {})).mentions[entity] = int(n)
    return list(out.values())


def mark_backfill(conn: Conn, namespace: uuid.UUID | None) -> int:
    """Every live row (of `namespace`, or all) without a done extraction of its current text is
    pending; how many rows this changed (rows already pending are left to whoever holds them)."""
    return conn.execute(
        "INSERT INTO entity_extraction (row_id, namespace_id, root_id, text_hash, status)"
        " SELECT id, namespace_id, coalesce(parent_id, id),"
        "   brainstream_extraction_hash(id, index_text_hash), 'pending'"
        " FROM objects WHERE deleted_at IS NULL"
        "   AND (%(ns)s::uuid IS NULL OR namespace_id = %(ns)s::uuid)"
        " ON CONFLICT (row_id) DO UPDATE SET status = 'pending', text_hash = EXCLUDED.text_hash,"
        "   attempts = 0, error = NULL, updated_at = now()"
        " WHERE entity_extraction.status = 'failed' OR (entity_extraction.status = 'done'"
        "   AND entity_extraction.extracted_hash IS DISTINCT FROM EXCLUDED.text_hash)",
        {"ns": namespace}).rowcount


def retry_failed(conn: Conn, row_id: uuid.UUID) -> None:
    """A failed row is pending again (`dlq retry` of its `extraction_failed` letter)."""
    conn.execute("UPDATE entity_extraction SET status = 'pending', attempts = 0, error = NULL,"
                 " lease_until = NULL, updated_at = now() WHERE row_id = %s AND status = 'failed'",
                 (row_id,))


# -- what operators read ---------------------------------------------------------------------


def counts_by_status(conn: Conn) -> dict[str, int]:
    """Rows per extraction status (`pending`, `done`, `failed`), plus `recount`: rows (and
    hard-deleted rows) whose entities wait for a recount."""
    out = {str(s): int(n) for s, n in conn.execute(
        "SELECT status, count(*) FROM entity_extraction GROUP BY status").fetchall()}
    row = conn.execute("SELECT (SELECT count(*) FROM entity_extraction WHERE recount)"
                       " + (SELECT count(DISTINCT row_id) FROM entity_recount)").fetchone()
    out["recount"] = int(row[0]) if row else 0
    return out


def pending_count(conn: Conn, *, older_than: float = 0.0) -> int:
    """Rows waiting for the stage; with `older_than`, only those nobody holds that have waited
    that long (what the sweep re-triggers), plus every hard-deleted row not recounted yet."""
    row = conn.execute(
        "SELECT (SELECT count(*) FROM entity_extraction WHERE (status = 'pending' OR recount)"
        "   AND (%(age)s = 0 OR (updated_at < now() - make_interval(secs => %(age)s)"
        "   AND (lease_until IS NULL OR lease_until < now()))))"
        " + (SELECT count(DISTINCT row_id) FROM entity_recount"
        "   WHERE %(age)s = 0 OR created_at < now() - make_interval(secs => %(age)s))",
        {"age": older_than}).fetchone()
    return int(row[0]) if row else 0
