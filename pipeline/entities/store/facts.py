"""The extraction stage's part in RELATES facts (migration 0053): the write path records the
facts a put states by entity name; the stage, having resolved the names, fills in their ids."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psycopg

Conn = psycopg.Connection[Any]
Key = tuple[uuid.UUID, str, str]  # (namespace, normalised name, label class)


def fill_ids(conn: Conn, row_ids: Sequence[uuid.UUID], known: Mapping[Key, uuid.UUID],
             key: Callable[[uuid.UUID, str, str], Key],
             lookup: Callable[[Sequence[Key]], Mapping[Key, uuid.UUID]]) -> int:
    """Give the facts the rows state (believed or not) the ids of the entities they name: from
    `known` (the batch's names), else `lookup`; a name no entity carries stays unresolved. How
    many facts were filled."""
    if not row_ids:
        return 0
    facts = conn.execute(
        "SELECT id, namespace_id, subject_name, subject_label, object_name, object_label"
        " FROM entity_facts WHERE row_id = ANY(%s) AND (subject_id IS NULL OR object_id IS NULL)"
        " ORDER BY id", (sorted(row_ids),)).fetchall()
    if not facts:
        return 0
    ends = {fid: (key(ns, s, sl), key(ns, o, ol)) for fid, ns, s, sl, o, ol in facts}
    found = dict(known)
    missing = sorted({k for pair in ends.values() for k in pair if k not in found})
    if missing:
        found.update(lookup(missing))
    filled = [(found[s], found[o], fid) for fid, (s, o) in ends.items()
              if s in found and o in found and found[s] != found[o]]
    if filled:
        with conn.cursor() as cur:
            cur.executemany("UPDATE entity_facts SET subject_id = %s, object_id = %s WHERE id = %s",
                            filled)
    return len(filled)
