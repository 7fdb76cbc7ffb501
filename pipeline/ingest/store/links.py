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

from pipeline.domain.links import link_id
from pipeline.domain.validity import Assertion, Version

Conn = psycopg.Connection[Any]
VersionKey = tuple[uuid.UUID, int]  # (to_id, seq)


# A group's versions, read after locking its `links` rows (the event's own link is locked
# already; a functional group's other targets too), in one round trip: the lock's count joins
# every version row, or stands alone (a row of NULLs) when the group has none.
_GROUP = """
WITH locked AS (SELECT 1 FROM links WHERE from_id = %(from)s AND relation_type = %(type)s
                {target} ORDER BY to_id FOR UPDATE)
SELECT v.to_id, v.seq, v.state, v.meta, v.valid_from, v.valid_to, v.asserted_to,
       v.invalidated_at
FROM (SELECT count(*) FROM locked) AS l
LEFT JOIN link_versions v ON v.from_id = %(from)s AND v.relation_type = %(type)s {v_target}
ORDER BY v.to_id, v.seq
"""

# Invalidate believed versions and insert new ones, one statement: the UPDATE runs whether or
# not a row is inserted (a data-modifying CTE always does).
_WRITE = """
WITH retired AS (
    UPDATE link_versions v SET invalidated_at = %(at)s, invalidated_by = %(by)s
    FROM unnest(%(old_to)s::uuid[], %(old_seq)s::integer[]) AS k(to_id, seq)
    WHERE v.from_id = %(from)s AND v.relation_type = %(type)s
      AND v.to_id = k.to_id AND v.seq = k.seq AND v.invalidated_at IS NULL)
INSERT INTO link_versions (namespace_id, from_id, relation_type, to_id, seq, state, meta,
                           valid_from, valid_to, asserted_to, recorded_at, recorded_by, change)
SELECT %(ns)s, %(from)s, %(type)s, r.to_id, r.seq, r.state, r.meta, r.valid_from, r.valid_to,
       r.asserted_to, %(at)s, %(by)s, r.change
FROM unnest(%(to)s::uuid[], %(seq)s::integer[], %(state)s::text[], %(meta)s::jsonb[],
            %(valid_from)s::timestamptz[], %(valid_to)s::timestamptz[],
            %(asserted_to)s::timestamptz[], %(change)s::text[])
     AS r(to_id, seq, state, meta, valid_from, valid_to, asserted_to, change)
"""


def group_versions(conn: Conn, from_id: uuid.UUID, relation_type: str,
                   to_id: uuid.UUID | None) -> tuple[list[tuple[VersionKey, Version]],
                                                     dict[uuid.UUID, int]]:
    """The believed versions of a group (`to_id` None: every target of the source, a functional
    group), keyed by (to_id, seq), and each link's last seq. The group's `links` rows are locked
    first, so two transactions cannot recompute one group at once."""
    one = to_id is not None
    query = _GROUP.format(target="AND to_id = %(to)s" if one else "",
                          v_target="AND v.to_id = %(to)s" if one else "")
    rows = conn.execute(query, {"from": from_id, "type": relation_type, "to": to_id}).fetchall()
    believed: list[tuple[VersionKey, Version]] = []
    last: dict[uuid.UUID, int] = {}
    for to, seq, state, meta, valid_from, valid_to, asserted_to, invalidated_at in rows:
        if to is None:
            continue  # the group has no version yet
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
    event `event_ref`, in one statement; seqs go on from each link's last."""
    if not invalidate and not insert:
        return
    seqs = dict(last)
    numbered = []
    for version, change in insert:
        seqs[version.to_id] = seqs.get(version.to_id, 0) + 1
        numbered.append((version, change, seqs[version.to_id]))
    conn.execute(_WRITE, {
        "at": at, "by": event_ref, "ns": namespace, "from": from_id, "type": relation_type,
        "old_to": [k[0] for k in invalidate], "old_seq": [k[1] for k in invalidate],
        "to": [v.to_id for v, _, _ in numbered], "seq": [n for _, _, n in numbered],
        "state": [v.state for v, _, _ in numbered],
        "meta": [Jsonb(dict(v.meta)) for v, _, _ in numbered],
        "valid_from": [v.valid_from for v, _, _ in numbered],
        "valid_to": [v.valid_to for v, _, _ in numbered],
        "asserted_to": [v.asserted_to for v, _, _ in numbered],
        "change": [c for _, c, _ in numbered]})


def set_link_state(conn: Conn, namespace: uuid.UUID, from_id: uuid.UUID, relation_type: str,
                   to_id: uuid.UUID, meta: dict[str, Any] | None, *, at: datetime,
                   event_id: str, version: int | None, fallback_meta: dict[str, Any]) -> None:
    """Make the link's current-state row say what holds at `at`: live with `meta`, or (None)
    soft-deleted (a new row keeps `fallback_meta`). `version` is the event's own link's."""
    live = meta is not None
    conn.execute(
        "INSERT INTO links (namespace_id, from_id, to_id, relation_type, meta, source_version,"
        " event_id, created_at, updated_at, deleted_at, link_id)"
        " VALUES (%(ns)s, %(from)s, %(to)s, %(type)s, %(meta)s, %(version)s, %(event)s,"
        " %(at)s, %(at)s, CASE WHEN %(live)s THEN NULL ELSE %(at)s::timestamptz END, %(id)s)"
        " ON CONFLICT (from_id, relation_type, to_id) DO UPDATE SET link_id = EXCLUDED.link_id,"
        " meta = CASE WHEN %(live)s THEN EXCLUDED.meta ELSE links.meta END,"
        " source_version = coalesce(EXCLUDED.source_version, links.source_version),"
        " event_id = EXCLUDED.event_id, updated_at = EXCLUDED.updated_at,"
        " deleted_at = CASE WHEN %(live)s THEN NULL"
        " ELSE coalesce(links.deleted_at, EXCLUDED.deleted_at) END",
        {"ns": namespace, "from": from_id, "to": to_id, "type": relation_type,
         "meta": Jsonb(meta if live else fallback_meta), "version": version, "event": event_id,
         "at": at, "live": live, "id": link_id(from_id, relation_type, to_id)})

