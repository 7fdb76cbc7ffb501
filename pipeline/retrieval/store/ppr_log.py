"""Pruning the PPR snapshots' change log (migration 0029), from the sweep.

An entry may go once every reader has had `retention` seconds to see it: the sweep records the
oldest running transaction (`xmin`) at each tick and deletes the entries of transactions below
the xmin it recorded at least `retention` ago (they had all finished by then, so they were
visible from then on). A reader that has not read the log for half the retention rebuilds
instead of tailing (`pipeline/retrieval/ppr/snapshots.py`).
"""

from __future__ import annotations

from typing import Any

import psycopg

OBSERVE = ("INSERT INTO ppr_snapshot_horizons (observed_at, horizon)"
           " VALUES (clock_timestamp(), pg_snapshot_xmin(pg_current_snapshot()))"
           " ON CONFLICT DO NOTHING")
_OLD = ("(SELECT max(observed_at) FROM ppr_snapshot_horizons"
        " WHERE observed_at < clock_timestamp() - make_interval(secs => %(r)s))")
PRUNE = ("DELETE FROM ppr_snapshot_log WHERE xid <"
         " (SELECT horizon FROM ppr_snapshot_horizons WHERE observed_at = " + _OLD + ")")
FORGET = "DELETE FROM ppr_snapshot_horizons WHERE observed_at < " + _OLD


def prune_log(conn: psycopg.Connection[Any], retention: float) -> int:
    """Record this tick's horizon and delete the entries every reader had time to see; how
    many were deleted."""
    with conn.transaction():
        conn.execute(OBSERVE)
        deleted = conn.execute(PRUNE, {"r": retention}).rowcount
        conn.execute(FORGET, {"r": retention})
    return max(deleted, 0)
