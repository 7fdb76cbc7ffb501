"""The write path's store of caller-supplied structure (migration 0053): each row's structure,
and the RELATES facts a put states, kept as a history (`PgEventStore.write_structure`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from pipeline.domain.structure import RowStructure, utc_iso
from pipeline.entities.names import normalise
from pipeline.postgres.timing import EVENT_TIME

Conn = psycopg.Connection[Any]
# (row, subject, subject label, predicate, object, object label, valid_from, valid_to): what
# makes one stated fact the same fact when a put states it again
FactKey = tuple[uuid.UUID, str, str, str, str, str, str | None, str | None]


def _keys(rows: Sequence[RowStructure]) -> set[FactKey]:
    return {(row.row_id, r.subject, r.subject_label, normalise(r.predicate), r.object,
             r.object_label, r.valid_from, r.valid_to)
            for row in rows for r in row.relations if normalise(r.predicate)}


def write_structure(conn: Conn, namespace: uuid.UUID, root_id: uuid.UUID, put_id: uuid.UUID,
                    row_ids: Sequence[uuid.UUID], rows: Sequence[RowStructure] | None,
                    event_id: str) -> None:
    """Replace the structure of the rows a put writes (`row_ids`; `rows` None: the put supplies
    none) and bring the put's facts up to date: those it no longer states are invalidated at the
    event's time, new ones recorded then. Before the object rows are upserted: their extraction
    hash reads it."""
    # one round trip for the common re-put (no structure before or after): the delete rides
    # with the read of the put's believed facts
    believed = conn.execute(
        "WITH gone AS (DELETE FROM row_structure WHERE row_id = ANY(%s))"
        " SELECT id, row_id, subject_name, subject_label, predicate, object_name, object_label,"
        " valid_from, valid_to FROM entity_facts WHERE put_id = %s AND invalidated_at IS NULL",
        (list(row_ids), put_id)).fetchall()
    if rows:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO row_structure (row_id, namespace_id, structure, digest)"
                " VALUES (%s, %s, %s, %s)",
                [(r.row_id, namespace, Jsonb(r.as_json()), r.digest()) for r in rows])
    wanted = _keys(rows or [])
    held: set[FactKey] = set()
    gone: list[int] = []
    for fid, row_id, s, sl, p, o, ol, vf, vt in believed:
        key = (row_id, s, sl, p, o, ol, utc_iso(vf), utc_iso(vt))
        if key in wanted and key not in held:
            held.add(key)
        else:  # no longer stated (or stated twice: one row stays believed)
            gone.append(fid)
    if gone:
        conn.execute(f"UPDATE entity_facts SET invalidated_at = {EVENT_TIME},"
                     " invalidated_by = %s WHERE id = ANY(%s)", (event_id, gone))
    new = sorted(wanted - held, key=repr)
    if new:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO entity_facts (namespace_id, root_id, put_id, row_id, subject_name,"
                " subject_label, predicate, object_name, object_label, valid_from, valid_to,"
                " recorded_at, recorded_by) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s,"
                f" %s::timestamptz, %s::timestamptz, {EVENT_TIME}, %s)",
                [(namespace, root_id, put_id, *key, event_id) for key in new])
        # The stage names the new facts' entities (`entities/store/facts.py: fill_ids`) when it
        # extracts their rows; a row whose text and structure did not change (a revival) would
        # not be extracted again, so it is pending (a new row is, by the upsert's trigger).
        conn.execute("UPDATE entity_extraction SET status = 'pending', attempts = 0,"
                     " error = NULL, updated_at = now()"
                     " WHERE row_id = ANY(%s) AND status <> 'pending'",
                     (sorted({key[0] for key in new}),))


def invalidate_facts(conn: Conn, object_id: uuid.UUID, event_id: str) -> None:
    """The object is deleted: the facts it (or any of its parts) states are no longer believed."""
    conn.execute(f"UPDATE entity_facts SET invalidated_at = {EVENT_TIME}, invalidated_by = %s"
                 " WHERE (root_id = %s OR put_id = %s) AND invalidated_at IS NULL",
                 (event_id, object_id, object_id))
