"""`brainstream purge`: hard-delete what was soft-deleted long enough ago.

Objects go with their parts, incident links and histories (foreign keys cascade); soft-deleted
links (with their versions) and finished outbox rows past the retention go too. The
processed-event ledger stays, so a replay of an old event about a purged object is still
recognised as applied. Each purged object gets an
outbox row, so the relay removes any graph remnant and the graph stays consistent.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import psycopg

from pipeline.domain.errors import InvalidInput
from pipeline.outbox import store as outbox
from pipeline.outbox.ops import NODE_SYNC
from pipeline.settings import Settings

_AGE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_age(text: str) -> timedelta:
    """'30d', '12h', '90m', '2w', '45s' -> timedelta."""
    match = _AGE.match(text.strip().lower())
    if match is None:
        raise InvalidInput(f"{text!r} is not an age like 30d, 12h, 90m", field="older_than")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


# Soft-deleted links past the retention go with their versions (link_versions references only
# the endpoints); a link whose believed version is yet to end (a put dated in the future leaves
# its row deleted until then) is kept.
_PURGE_LINKS = """
WITH gone AS (
    DELETE FROM links l WHERE l.deleted_at < now() - make_interval(secs => %s)
      AND NOT EXISTS (SELECT 1 FROM link_versions v WHERE v.from_id = l.from_id
                      AND v.relation_type = l.relation_type AND v.to_id = l.to_id
                      AND v.state = 'holds' AND v.invalidated_at IS NULL
                      AND (v.valid_to IS NULL OR v.valid_to > now()))
    RETURNING from_id, relation_type, to_id),
versions AS (
    DELETE FROM link_versions v USING gone g WHERE v.from_id = g.from_id
      AND v.relation_type = g.relation_type AND v.to_id = g.to_id)
SELECT count(*) FROM gone
"""


@dataclass
class PurgeResult:
    objects: int = 0
    parts: int = 0
    links: int = 0
    outbox_rows: int = 0


def purge(settings: Settings, older_than: timedelta, *, batch: int = 1000,
          progress: Callable[[PurgeResult], None] | None = None) -> PurgeResult:
    result = PurgeResult()
    cutoff_seconds = older_than.total_seconds()
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        while True:
            with conn.transaction():
                roots = conn.execute(
                    "SELECT id, namespace_id FROM objects WHERE parent_id IS NULL"
                    " AND deleted_at < now() - make_interval(secs => %s)"
                    " ORDER BY deleted_at LIMIT %s FOR UPDATE SKIP LOCKED",
                    (cutoff_seconds, batch)).fetchall()
                if not roots:
                    break
                ids = [r[0] for r in roots]
                parts = conn.execute("SELECT count(*) FROM objects WHERE parent_id = ANY(%s)",
                                     (ids,)).fetchone()
                links = conn.execute(
                    "SELECT count(*) FROM links WHERE from_id = ANY(%s) OR to_id = ANY(%s)",
                    (ids, ids)).fetchone()
                conn.execute("DELETE FROM objects WHERE id = ANY(%s)", (ids,))
                outbox.enqueue_many(conn, [outbox.Entry(ns, i, NODE_SYNC) for i, ns in roots])
            result.objects += len(ids)
            result.parts += int(parts[0]) if parts else 0
            result.links += int(links[0]) if links else 0
            if progress is not None:
                progress(result)
        # parts deleted on their own (a soft-deleted explicit part of a live parent)
        cur = conn.execute("DELETE FROM objects WHERE parent_id IS NOT NULL"
                           " AND deleted_at < now() - make_interval(secs => %s)",
                           (cutoff_seconds,))
        result.parts += cur.rowcount
        row = conn.execute(_PURGE_LINKS, (cutoff_seconds,)).fetchone()
        result.links += int(row[0]) if row else 0
        result.outbox_rows += outbox.delete_done(conn, cutoff_seconds)
    return result
