"""Whether the database maintains the SQL BM25 postings (`search_postings`, migrations 0008/0009)
and, with them, the search vocabulary (`search_vocab`, its queue `search_vocab_pending`, 0007).

Only LEXICAL_ENGINE=postgres reads them (the SQL lexical and trigram channels); under tantivy
they cost the consumer's transaction more than half of its Postgres CPU and three quarters of its
WAL for nothing (`python -m bench.ingest.leanwrites`; docs/lexical.md). The switch is the
enabled state of the three postings triggers on `objects`, not a flag table their function
would read:
- off costs writers nothing (a disabled trigger is skipped by the executor; a flag would still
  run the PL/pgSQL function and a lookup for every row written);
- `ALTER TABLE ... ENABLE/DISABLE TRIGGER` takes SHARE ROW EXCLUSIVE on `objects`, the lock a
  switch needs anyway: it waits for the writers in flight and holds new ones until the switch
  commits, so no write can slip between the rebuild and the triggers coming on; searches (ACCESS
  SHARE) are not blocked.

`align_sql_postings` brings the state in line with LEXICAL_ENGINE; the migration runner calls it
after the migrations, under its lock, so every start (`brainstream up`, `migrate`, a replay's new
generation) aligns the database it migrated.
"""

from __future__ import annotations

from typing import Any, Literal

import psycopg
from psycopg_pool import AsyncConnectionPool

TRIGGERS = ("objects_postings_insert", "objects_postings_update", "objects_postings_delete")

# How many of the postings triggers fire ('O': origin and local sessions; 'D': disabled). The
# postings are maintained only when all do; a partial state (a trigger switched by hand, a bulk
# load interrupted) is neither, and the next alignment settles it.
_ENABLED = ("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'objects'::regclass"
            " AND tgname = ANY(%(names)s) AND tgenabled <> 'D'")
_ALTER = "ALTER TABLE objects " + ", ".join(f"{{verb}} TRIGGER {name}" for name in TRIGGERS)
_EMPTY = "TRUNCATE search_postings, search_vocab, search_vocab_pending"
# The vocabulary of every row, as migration 0007 filled it and `refresh_vocab` keeps it (one
# sorted statement: nothing else inserts meanwhile, the switch holds the writers).
_FILL_VOCAB = ("INSERT INTO search_vocab (namespace_id, lexeme)"
               " SELECT DISTINCT o.namespace_id, l FROM objects o,"
               " unnest(tsvector_to_array(o.lexical)) AS l ORDER BY 1, 2 ON CONFLICT DO NOTHING")

# What an API process configured for the SQL engine says when the database does not keep them.
NOT_MAINTAINED = ("LEXICAL_ENGINE=postgres but this database does not maintain the SQL BM25 "
                  "postings (it was last migrated with LEXICAL_ENGINE=tantivy): the lexical and "
                  "trigram channels find nothing; run `brainstream migrate` with "
                  "LEXICAL_ENGINE=postgres to rebuild them")

Engine = Literal["postgres", "tantivy"]


def _count(row: tuple[Any, ...] | None) -> int:
    return int(row[0]) if row else 0


def _enabled(conn: psycopg.Connection[Any]) -> int:
    return _count(conn.execute(_ENABLED, {"names": list(TRIGGERS)}).fetchone())


def postings_maintained(conn: psycopg.Connection[Any]) -> bool:
    """Whether the postings triggers are on (the SQL postings and vocabulary kept current)."""
    return _enabled(conn) == len(TRIGGERS)


async def postings_maintained_async(pool: AsyncConnectionPool[Any], *,
                                    timeout: float = 2.0) -> bool:
    """`postings_maintained` through an async pool (the API's readiness check, which must not
    hang: waiting longer than `timeout` for a connection raises)."""
    async with pool.connection(timeout=timeout) as conn:
        cur = await conn.execute(_ENABLED, {"names": list(TRIGGERS)})
        return _count(await cur.fetchone()) == len(TRIGGERS)


def align_sql_postings(conn: psycopg.Connection[Any], engine: Engine) -> str | None:
    """Make the database maintain the SQL postings exactly when `engine` is postgres; what was
    done, or None when it already was so (idempotent: the state is read first, and re-read
    under the switch's lock, so concurrent callers switch once).

    tantivy: triggers off, postings and vocabulary emptied (TRUNCATE: the space comes back).
    postgres: triggers on, then every searchable row's postings rebuilt
    (`brainstream_rebuild_postings`) and the vocabulary refilled, in the same transaction;
    writers wait for it (searches do not).
    `conn` must be in autocommit mode (each switch is its own transaction)."""
    wanted = engine == "postgres"
    target = len(TRIGGERS) if wanted else 0
    if _enabled(conn) == target:
        return None
    with conn.transaction():
        conn.execute("LOCK TABLE objects IN SHARE ROW EXCLUSIVE MODE")
        if _enabled(conn) == target:  # another process switched meanwhile
            return None
        conn.execute(_ALTER.format(verb="ENABLE" if wanted else "DISABLE"))
        conn.execute(_EMPTY)
        if not wanted:
            return ("SQL BM25 postings off (LEXICAL_ENGINE=tantivy): triggers disabled, "
                    "search_postings and search_vocab emptied")
        # The rebuild asks `brainstream_searchable` of every row (two index probes each) through
        # a plan made from the table's statistics: on rows loaded since the last (auto)analyze
        # that plan scans the table per row (15,000 SciFact rows: 64 s, 7 s after ANALYZE).
        conn.execute("ANALYZE objects")
        row = conn.execute("SELECT brainstream_rebuild_postings()").fetchone()
        vocab = conn.execute(_FILL_VOCAB).rowcount
    return (f"SQL BM25 postings on (LEXICAL_ENGINE=postgres): rebuilt {int(row[0]) if row else 0}"
            f" postings and {vocab} vocabulary words")
