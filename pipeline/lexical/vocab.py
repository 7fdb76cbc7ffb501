"""The search vocabulary (`search_vocab`): every lexeme of every row's `lexical`, per namespace.

The trigram channel fuzzy-matches unknown query words against it. Writers only queue the rows
whose text changed (`search_vocab_pending`, filled by the postings trigger); `refresh_vocab`
moves their lexemes in. One refresher runs at a time (advisory lock) and inserts in one sorted
statement, so nothing here can deadlock with writers, and a queued row is seen once its writing
transaction has committed, whatever its timestamps say.
"""

from __future__ import annotations

from typing import Any

import psycopg

_LOCK_KEY = 0x6272_6169_6E76  # "brainv": one vocabulary refresher at a time
BATCH_ROWS = 5000


def refresh_vocab(conn: psycopg.Connection[Any]) -> int | None:
    """Move the lexemes of the queued rows into the vocabulary, in batches of `BATCH_ROWS` rows,
    each in its own transaction; the number of rows taken off the queue, or None when another
    refresher holds the lock."""
    taken = 0
    while True:
        with conn.transaction():
            locked = conn.execute("SELECT pg_try_advisory_xact_lock(%s)",
                                  (_LOCK_KEY,)).fetchone()
            if not locked or not locked[0]:
                return None if taken == 0 else taken
            row = conn.execute(
                "WITH q AS (DELETE FROM search_vocab_pending WHERE ctid = ANY(ARRAY("
                "SELECT ctid FROM search_vocab_pending LIMIT %(n)s)) RETURNING row_id),"
                " ins AS (INSERT INTO search_vocab (namespace_id, lexeme)"
                " SELECT DISTINCT o.namespace_id, l FROM objects o,"
                " unnest(tsvector_to_array(o.lexical)) AS l"
                " WHERE o.id IN (SELECT row_id FROM q) ORDER BY 1, 2 ON CONFLICT DO NOTHING)"
                " SELECT count(*) FROM q", {"n": BATCH_ROWS}).fetchone()
        done = int(row[0]) if row else 0
        taken += done
        if done < BATCH_ROWS:
            return taken
