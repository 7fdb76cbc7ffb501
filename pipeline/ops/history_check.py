"""The history invariants `brainstream verify` checks (migration 0050): what the write path
(pipeline/ingest/links.py, pipeline/domain/validity.py) keeps true, so a violation means rows
were written or changed by something else.

- no two believed holding versions of a functional relation type's group overlap in valid time;
- every holding version's interval is ordered (valid_from < valid_to);
- every live `links` row has a believed version holding at its last write (the row says what
  held at its last event's time);
- the seqs of each link's and each object's versions run 1, 2, ... without a gap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from pipeline.settings import Settings

# Each check counts its violations (and names a few).
_CHECKS: dict[str, str] = {
    "overlapping versions of functional links": """
        SELECT a.from_id::text || ' ' || a.relation_type FROM link_versions a
        JOIN relation_types r ON r.relation_type = a.relation_type
             AND r.spec ->> 'functional' = 'true'
        JOIN link_versions b ON b.from_id = a.from_id AND b.relation_type = a.relation_type
             AND (b.to_id, b.seq) > (a.to_id, a.seq)
             AND b.state = 'holds' AND b.invalidated_at IS NULL
        WHERE a.state = 'holds' AND a.invalidated_at IS NULL
          AND tstzrange(a.valid_from, a.valid_to) && tstzrange(b.valid_from, b.valid_to)""",
    "versions with valid_from not before valid_to": """
        SELECT from_id::text || ' ' || relation_type || ' ' || to_id::text FROM link_versions
        WHERE valid_from >= valid_to""",
    "live links without a version holding": """
        SELECT l.from_id::text || ' ' || l.relation_type || ' ' || l.to_id::text FROM links l
        WHERE l.deleted_at IS NULL AND NOT EXISTS (
            SELECT 1 FROM link_versions v WHERE v.from_id = l.from_id
              AND v.relation_type = l.relation_type AND v.to_id = l.to_id
              AND v.state = 'holds' AND v.invalidated_at IS NULL
              AND (v.valid_from IS NULL OR v.valid_from <= l.updated_at)
              AND (v.valid_to IS NULL OR v.valid_to > l.updated_at))""",
    "links whose version seqs have a gap": """
        SELECT from_id::text || ' ' || relation_type || ' ' || to_id::text FROM link_versions
        GROUP BY from_id, relation_type, to_id HAVING min(seq) <> 1 OR max(seq) <> count(*)""",
    "objects whose version seqs have a gap": """
        SELECT object_id::text FROM object_versions
        GROUP BY object_id HAVING min(seq) <> 1 OR max(seq) <> count(*)""",
}
_EXAMPLES = 5


@dataclass(frozen=True)
class HistoryCheck:
    """Per invariant, how many violate it and the first few."""

    violations: dict[str, tuple[int, list[str]]]

    @property
    def clean(self) -> bool:
        return all(n == 0 for n, _ in self.violations.values())


def check_history(conn: psycopg.Connection[Any]) -> HistoryCheck:
    """Check every invariant on this database."""
    out: dict[str, tuple[int, list[str]]] = {}
    for name, query in _CHECKS.items():
        rows = conn.execute(f"SELECT count(*) OVER (), x FROM ({query}) AS v(x) LIMIT %s",
                            (_EXAMPLES,)).fetchall()
        out[name] = (rows[0][0] if rows else 0, [r[1] for r in rows])
    return HistoryCheck(out)


def verify_history(settings: Settings) -> HistoryCheck:
    """`check_history` on the settings' database."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        return check_history(conn)
