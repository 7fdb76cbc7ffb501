"""The SQL of memory's after-commit work (migrations/0017_memory.sql): claiming per-message
extractor rows and session summariser rows with a lease, and writing results back by
compare-and-set, so two workers (or a worker and its killed predecessor's lease) never apply a
result twice and a message changed meanwhile is not overwritten with a stale one.

A claim stamps `lease_until`; that stamp is the claim's token: a write-back matches on it, so a
worker whose lease ran out (and whose rows another worker re-claimed) writes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, LiteralString

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from pipeline.domain.memory_values import ClaimedMessage, MessageIndex
from pipeline.domain.retry import retry_transient
from pipeline.embedding.reuse import Key, VectorReuse, lookup_in
from pipeline.entities.store.message_mentions import MessageEntities, link_messages

_CLAIM_MESSAGES = """
UPDATE message_extraction x SET lease_until = now() + make_interval(secs => %(lease)s),
       updated_at = now()
FROM (SELECT namespace_id, message_uuid FROM message_extraction
      WHERE extractor = %(extractor)s AND status = 'pending'
        AND (lease_until IS NULL OR lease_until < now())
        AND (%(sessions)s::uuid[] IS NULL OR session_pk = ANY(%(sessions)s::uuid[]))
      ORDER BY created_at, message_uuid
      LIMIT %(limit)s
      FOR UPDATE SKIP LOCKED) c,
     messages m
WHERE x.extractor = %(extractor)s AND x.namespace_id = c.namespace_id
  AND x.message_uuid = c.message_uuid
  AND m.namespace_id = x.namespace_id AND m.uuid = x.message_uuid
RETURNING x.namespace_id, x.message_uuid, x.session_pk, x.lease_until, m.content, m.event_id,
  (SELECT array_agg(p.content ORDER BY p.seq) FROM
     (SELECT p.content, p.seq FROM messages p WHERE p.session_pk = m.session_pk
      AND p.seq < m.seq AND p.deleted_at IS NULL ORDER BY p.seq DESC LIMIT %(turns)s) p),
  m.created_at
"""

# Stored vectors of messages' dense texts by (namespace, text hash) (migration 0042's index)
stored_message_vectors = lookup_in("messages", "embedded_hash")


# The message's column written by each extractor; its state row is marked done in the same
# statement's transaction, only while the claim's lease stamp is still the row's.
_SET: dict[str, LiteralString] = {
    "token": "token_count = %(value)s",
    # the vector of the message's dense text and the lexemes of its lexical text
    # (pipeline/domain/memory_values.py: ContextRule)
    "embed": "embedding = %(value)s, embedded_hash = %(hash)s, model = %(model)s,"
             " context_lexical = to_tsvector('english', %(context)s)",
    "entities": "metadata = jsonb_set(metadata, '{system}', coalesce(metadata -> 'system',"
                " '{}'::jsonb) || jsonb_build_object('entities', %(value)s::jsonb))",
}


class PgMessageWork:
    """`MessageWork` on Postgres (a sync pool: the workers')."""

    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool

    def claim_messages(self, extractor: str, sessions: Sequence[uuid.UUID] | None, *,
                       lease: float, limit: int, context_turns: int = 0
                       ) -> list[ClaimedMessage]:
        """Pending rows of `extractor` (of `sessions`, or any) nobody holds, leased to the
        caller, each with the contents of up to `context_turns` visible turns before it. A
        message deleted since (cascade) is simply absent."""
        with self.pool.connection() as conn:
            rows = conn.execute(_CLAIM_MESSAGES, {
                "extractor": extractor, "lease": lease, "limit": limit, "turns": context_turns,
                "sessions": list(sessions) if sessions is not None else None}).fetchall()
        return [ClaimedMessage(ns, uid, session, until, content, event, tuple(previous or ()),
                               created)
                for ns, uid, session, until, content, event, previous, created in rows]

    def find_vectors(self, reuse: VectorReuse, keys: Sequence[Key]) -> dict[Key, Any]:
        """Stored vectors of messages' dense texts (here, then in `reuse`'s source)."""
        return reuse.find(self.pool, stored_message_vectors, keys)

    def write_results(self, extractor: str,
                      results: Sequence[tuple[ClaimedMessage, Any]]) -> int:
        """Store each claimed message's result (the embed extractor's: a `MessageIndex`) and
        mark its row done, where the claim still holds (same lease stamp, message content
        unchanged); the number stored. One transaction; rows in one order (namespace, uuid) so
        writers cannot deadlock. The entities extractor's results also feed the namespace's
        entity layer in the same transaction (`message_mentions.link_messages`)."""
        statement = sql.SQL(
            "UPDATE messages SET {}, updated_at = now()"
            " WHERE namespace_id = %(ns)s AND uuid = %(uuid)s AND content = %(content)s"
            " AND EXISTS (SELECT 1 FROM message_extraction"
            "   WHERE namespace_id = %(ns)s AND message_uuid = %(uuid)s"
            "   AND extractor = %(extractor)s AND status = 'pending'"
            "   AND lease_until = %(lease)s)").format(sql.SQL(_SET[extractor]))
        ordered = sorted(results, key=lambda r: (str(r[0].namespace_id), str(r[0].message_uuid)))

        def once() -> int:
            stored = 0
            linked: list[MessageEntities] = []
            with self.pool.connection() as conn, conn.transaction():
                for claimed, value in ordered:
                    params = {"ns": claimed.namespace_id, "uuid": claimed.message_uuid,
                              "content": claimed.content, "extractor": extractor,
                              "lease": claimed.lease,
                              "value": Jsonb(value) if extractor == "entities" else value}
                    if isinstance(value, MessageIndex):
                        params.update(value=value.vector, context=value.lexical,
                                      hash=value.text_hash, model=value.model)
                    if conn.execute(statement, params).rowcount != 1:
                        continue
                    conn.execute(
                        "UPDATE message_extraction SET status = 'done', lease_until = NULL,"
                        " error = NULL, attempts = attempts + 1, updated_at = now()"
                        " WHERE namespace_id = %s AND message_uuid = %s AND extractor = %s",
                        (claimed.namespace_id, claimed.message_uuid, extractor))
                    stored += 1
                    if extractor == "entities":
                        linked.append(MessageEntities(claimed.namespace_id,
                                                      claimed.message_uuid, value))
                link_messages(conn, linked)
            return stored

        # The entity writes meet the document extraction's and the resolver's merges, which
        # may lock in another order: Postgres then aborts one side, and the results in hand
        # are written again (as the extraction stage does).
        return retry_transient(once, attempts=5, max_wait=2.0,
                               transient=(psycopg.errors.TransactionRollback,))

    def mark_failed(self, extractor: str, rows: Sequence[ClaimedMessage], error: str) -> None:
        """The extractor gave up on the rows (retries exhausted, or refused): failed, with
        why, where the claim still holds."""
        with self.pool.connection() as conn, conn.transaction():
            for claimed in rows:
                conn.execute(
                    "UPDATE message_extraction SET status = 'failed', error = %s,"
                    " attempts = attempts + 1, lease_until = NULL, updated_at = now()"
                    " WHERE namespace_id = %s AND message_uuid = %s AND extractor = %s"
                    " AND status = 'pending' AND lease_until = %s",
                    (error[:2000], claimed.namespace_id, claimed.message_uuid, extractor,
                     claimed.lease))


def pending_work(conn: psycopg.Connection[Any], *, older_than: float) -> int:
    """Extractor rows and summariser requests nobody holds that waited `older_than` seconds:
    what the sweep must trigger again (a lost trigger, a killed worker)."""
    row = conn.execute(
        "SELECT (SELECT count(*) FROM message_extraction WHERE status = 'pending'"
        "   AND created_at < now() - make_interval(secs => %(age)s)"
        "   AND (lease_until IS NULL OR lease_until < now()))"
        " + (SELECT count(*) FROM session_summariser WHERE pending"
        "   AND requested_at < now() - make_interval(secs => %(age)s)"
        "   AND (lease_until IS NULL OR lease_until < now()))", {"age": older_than}).fetchone()
    return int(row[0]) if row else 0
