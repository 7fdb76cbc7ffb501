"""The API's read of the processed-event ledger (`processed_events`, migrations/0002): which of
some events the pipeline has applied, for `POST /v1/events` with `wait`. One primary-key probe
per event, under the caller's namespace only."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool

from pipeline.postgres.pool import AsyncConn, read_connection

# An event is in the ledger once the consumer applied it (a stale one too: it was handled);
# one dead-lettered or still deferred is not.
_APPLIED = """
SELECT p.source, p.event_id
FROM unnest(%(sources)s::text[], %(ids)s::text[]) AS e(source, event_id)
JOIN processed_events p
  ON p.namespace_id = %(ns)s AND p.source = e.source AND p.event_id = e.event_id
"""


class PgEventLedger:
    """Reads the ledger for the API (its read pool)."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn]) -> None:
        self.pool = pool

    async def applied(self, namespace: uuid.UUID, events: Sequence[tuple[str, str]]
                      ) -> set[tuple[str, str]]:
        """The (source, event id) pairs of `events` the ledger holds for `namespace`."""
        if not events:
            return set()
        async with read_connection(self.pool) as conn:
            cur = conn.cursor(row_factory=tuple_row)
            await cur.execute(_APPLIED, {"ns": namespace,
                                          "sources": [s for s, _ in events],
                                          "ids": [i for _, i in events]})
            return {(str(s), str(i)) for s, i in await cur.fetchall()}
