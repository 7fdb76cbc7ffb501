"""The write path's link SQL (`PgEventStore`, ingest/store/events.py): a group's believed versions
(migration 0050), writing the change a new assertion makes to them, and the current-state `links`
row the reads and the graph relay use."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from pipeline.domain.validity import Assertion, Version

Conn = psycopg.Connection[Any]
VersionKey = tuple[uuid.UUID, int]  # (to_id, seq)


def group_versions(conn: Conn, from_id: uuid.UUID, relation_type: str,
                   to_id: uuid.UUID | None) -> tuple[list[tuple[VersionKey, Version]],
                                                     dict[uuid.UUID, int]]:
    """The believed versions of a group (`to_id` None: every target of the source, a functional
    group), keyed by (to_id, seq), and each link's last seq. The group's `links` rows are locked
    first, so two transactions cannot recompute one group at once."""
    target = "" if to_id is None else " AND to_id = %(to)s"
    params = {"from": from_id, "type": relation_type, "to": to_id}
    conn.execute("SELECT 1 FROM links WHERE from_id = %(from)s AND relation_type = %(type)s"
                  + target + " ORDER BY to_id FOR UPDATE", params)
    rows = conn.execute(
        "SELECT to_id, seq, state, meta, valid_from, valid_to, asserted_to, invalidated_at"
        " FROM link_versions WHERE from_id = %(from)s AND relation_type = %(type)s" + target
        + " ORDER BY to_id, seq", params).fetchall()
    believed: list[tuple[VersionKey, Version]] = []
    last: dict[uuid.UUID, int] = {}
    for to, seq, state, meta, valid_from, valid_to, asserted_to, invalidated_at in rows:
        last[to] = seq
        if invalidated_at is None:
            origin = Assertion(to, state, valid_from, asserted_to, meta)
            believed.append(((to, seq), Version(to, state, valid_from, valid_to, asserted_to,
                                                meta, origin)))
    return believed, last


def write_versions(conn: Conn, namespace: uuid.UUID, from_id: uuid.UUID, relation_type: str,
                   invalidate: Sequence[VersionKey], insert: Sequence[tuple[Version, str]],
                   last: dict[uuid.UUID, int], *, at: datetime, event_ref: str) -> None:
    """Invalidate believed versions and insert new ones (each with its change), at `at` by the
    event `event_ref`; seqs go on from each link's last."""
    if invalidate:
        conn.execute(
            "UPDATE link_versions v SET invalidated_at = %(at)s, invalidated_by = %(by)s"
            " FROM unnest(%(to)s::uuid[], %(seq)s::integer[]) AS k(to_id, seq)"
            " WHERE v.from_id = %(from)s AND v.relation_type = %(type)s"
            " AND v.to_id = k.to_id AND v.seq = k.seq AND v.invalidated_at IS NULL",
            {"at": at, "by": event_ref, "from": from_id, "type": relation_type,
             "to": [k[0] for k in invalidate], "seq": [k[1] for k in invalidate]})
    if not insert:
        return
    seqs = dict(last)
    rows = []
    for version, change in insert:
        seqs[version.to_id] = seqs.get(version.to_id, 0) + 1
        rows.append((namespace, from_id, relation_type, version.to_id, seqs[version.to_id],
                     version.state, Jsonb(dict(version.meta)), version.valid_from,
                     version.valid_to, version.asserted_to, at, event_ref, change))
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO link_versions (namespace_id, from_id, relation_type, to_id, seq, state,"
            " meta, valid_from, valid_to, asserted_to, recorded_at, recorded_by, change)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", rows)


def set_link_state(conn: Conn, namespace: uuid.UUID, from_id: uuid.UUID, relation_type: str,
                   to_id: uuid.UUID, meta: dict[str, Any] | None, *, at: datetime,
                   event_id: str, version: int | None, fallback_meta: dict[str, Any]) -> None:
    """Make the link's current-state row say what holds at `at`: live with `meta`, or (None)
    soft-deleted (a new row keeps `fallback_meta`). `version` is the event's own link's."""
    live = meta is not None
    conn.execute(
        "INSERT INTO links (namespace_id, from_id, to_id, relation_type, meta, source_version,"
        " event_id, created_at, updated_at, deleted_at)"
        " VALUES (%(ns)s, %(from)s, %(to)s, %(type)s, %(meta)s, %(version)s, %(event)s,"
        " %(at)s, %(at)s, CASE WHEN %(live)s THEN NULL ELSE %(at)s::timestamptz END)"
        " ON CONFLICT (from_id, relation_type, to_id) DO UPDATE SET"
        " meta = CASE WHEN %(live)s THEN EXCLUDED.meta ELSE links.meta END,"
        " source_version = coalesce(EXCLUDED.source_version, links.source_version),"
        " event_id = EXCLUDED.event_id, updated_at = EXCLUDED.updated_at,"
        " deleted_at = CASE WHEN %(live)s THEN NULL"
        " ELSE coalesce(links.deleted_at, EXCLUDED.deleted_at) END",
        {"ns": namespace, "from": from_id, "to": to_id, "type": relation_type,
         "meta": Jsonb(meta if live else fallback_meta), "version": version, "event": event_id,
         "at": at, "live": live})


def functional_types(conn: Conn) -> frozenset[str]:
    """The relation types the catalog marks functional."""
    rows = conn.execute("SELECT relation_type FROM relation_types"
                        " WHERE (spec ->> 'functional')::boolean").fetchall()
    return frozenset(r[0] for r in rows)
