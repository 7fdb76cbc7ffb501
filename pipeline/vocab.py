"""The search vocabulary (`search_vocab`): every lexeme of every row's `lexical`, per namespace.

The trigram channel fuzzy-matches unknown query words against it. `refresh_vocab` adds the
lexemes of rows written since the last refresh; one refresher runs at a time (advisory lock) and
inserts in one sorted statement, so concurrent writers never deadlock on it. The window reaches
`OVERLAP` back before the recorded high-water mark because `updated_at` is the writing
transaction's start time, and a transaction may commit after a later one did.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

OVERLAP = timedelta(seconds=30)
_LOCK_KEY = 0x6272_6169_6E76  # "brainv": one vocabulary refresher at a time


def refresh_vocab(conn: psycopg.Connection[Any]) -> int | None:
    """Add the lexemes of rows updated since the last refresh; the number of rows scanned, or
    None when another refresher holds the lock. Commits its own transaction."""
    with conn.transaction():
        locked = conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (_LOCK_KEY,)).fetchone()
        if not locked or not locked[0]:
            return None
        row = conn.execute("SELECT refreshed_to FROM search_vocab_state WHERE id = 1"
                           " FOR UPDATE").fetchone()
        since = row[0] if row else None
        top = conn.execute("SELECT max(updated_at) FROM objects").fetchone()
        high = top[0] if top else None
        if high is None:
            return 0
        window, params = "", {}
        if since is not None:
            window, params = " WHERE o.updated_at >= %(since)s", {"since": since - OVERLAP}
        scanned = conn.execute(
            "WITH r AS MATERIALIZED (SELECT o.namespace_id, o.lexical FROM objects o" + window
            + "), ins AS (INSERT INTO search_vocab (namespace_id, lexeme)"
            " SELECT DISTINCT r.namespace_id, l FROM r, unnest(tsvector_to_array(r.lexical)) AS l"
            " ORDER BY 1, 2 ON CONFLICT DO NOTHING) SELECT count(*) FROM r", params).fetchone()
        conn.execute("UPDATE search_vocab_state SET refreshed_to = %s WHERE id = 1", (high,))
        return int(scanned[0]) if scanned else 0
