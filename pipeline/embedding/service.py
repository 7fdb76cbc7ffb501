"""Embedding pending objects: claim, embed in batches with retries, write back, hand to the graph.

Rows are claimed with a lease (not a lock), so a slow model never blocks the consumers; the write
back is a compare-and-set on the index text hash, so a put that changed the text meanwhile wins
and its row stays pending for the next round. Any number of worker processes can run this at
once: claims skip rows another worker holds.

A claimed batch mixes rows of every tenant, so one text the embedder refuses (a permanent error)
must not fail the others: the batch is halved until each refused text is alone, and only its row
fails. Retries exhausted on an outage (a transient error) fail the batch as a whole: the embedder
is down for every row alike, and halving would only multiply the calls to it. What reaches the
embedder is capped at `EMBED_TEXT_CAP_CHARS`.

A row whose text this model already embedded in the same namespace (another object with the same
text, the live generation's row during a replay) takes the stored vector instead of a model call
(`pipeline/embedding/reuse.py`).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg_pool import ConnectionPool

from pipeline.domain.errors import BrainstreamError, EmbeddingFailed, Unavailable
from pipeline.domain.index_text import (
    CONTENT_CAP_CHARS,
    embedder_text,
    entity_index_text,
    part_index_text,
)
from pipeline.domain.retry import give_up_error, isolate_refused, retry_transient
from pipeline.embedding.embedders.base import embed_distinct
from pipeline.embedding.identity import EMBED_TEXT_CAP_CHARS
from pipeline.embedding.reuse import VectorReuse, lookup_in
from pipeline.embedding.settings import EmbeddingSettings
from pipeline.kafka.io import dead_letter_headers
from pipeline.metrics import instruments as metrics
from pipeline.outbox import store as outbox
from pipeline.outbox.ops import NODE_SYNC
from pipeline.ports import DeadLetterSink, Embedder

log = logging.getLogger(__name__)

# A batch that fails is retried with jittered back-off up to this many times (at most this many
# seconds between tries), then its rows are marked failed and dead-lettered: a model server's
# restart takes seconds, and a longer outage must not hold the stage.
EMBED_RETRY_ATTEMPTS = 5
EMBED_RETRY_MAX_WAIT = 10.0

# Rows live in `object_embeddings` (migration 0033): the lease is a HOT update of a narrow row,
# the wide `objects` row is only read (is it visible?).
_CLAIM = """
UPDATE object_embeddings SET embed_lease_until = now() + make_interval(secs => %(lease)s)
WHERE id IN (
    SELECT e.id FROM object_embeddings e JOIN objects o ON o.id = e.id
    WHERE e.embed_status = 'pending' AND o.deleted_at IS NULL
      AND (e.embed_lease_until IS NULL OR e.embed_lease_until < now())
      AND (%(roots)s::uuid[] IS NULL OR e.root_id = ANY(%(roots)s::uuid[]))
    ORDER BY e.queued_at, e.id
    LIMIT %(limit)s
    FOR UPDATE OF e SKIP LOCKED)
RETURNING id
"""

_LOAD = """
SELECT o.id, o.namespace_id, o.parent_id, o.title, o.summary, o.properties, o.content,
       p.title, o.index_text_hash, o.event_id
FROM objects o LEFT JOIN objects p ON p.id = o.parent_id
WHERE o.id = ANY(%s)
ORDER BY o.id
"""


@dataclass(frozen=True)
class _Row:
    id: uuid.UUID
    namespace_id: uuid.UUID
    parent_id: uuid.UUID | None
    text: str
    index_text_hash: str
    event_id: str | None

    @property
    def root(self) -> uuid.UUID:
        return self.parent_id or self.id


@dataclass
class EmbedStats:
    claimed: int = 0
    embedded: int = 0  # by a model call
    reused: int = 0  # a stored vector of the same text and model
    failed: int = 0
    roots_completed: int = 0


class EmbeddingService:
    """Embeds what the write path left pending."""

    def __init__(self, settings: EmbeddingSettings, pool: ConnectionPool, embedder: Embedder,
                 dead_letters: DeadLetterSink | None = None, *,
                 reuse: VectorReuse | None = None) -> None:
        self.settings = settings
        self.pool = pool
        self.embedder = embedder
        self.dead_letters = dead_letters
        self.reuse = reuse or VectorReuse.of(embedder)

    def run(self, roots: Sequence[uuid.UUID] | None = None, *, max_batches: int = 1000
            ) -> EmbedStats:
        """Embed pending rows (of `roots`, or all) until none is left or `max_batches` ran."""
        stats = EmbedStats()
        for _ in range(max_batches):
            ids = self._claim(roots)
            if not ids:
                break
            stats.claimed += len(ids)
            self._embed_batch(ids, stats)
        return stats

    def _claim(self, roots: Sequence[uuid.UUID] | None) -> list[uuid.UUID]:
        with self.pool.connection() as conn:
            return claim(conn, roots, lease=self.settings.embed_lease_seconds,
                         limit=self.settings.embed_batch_size)

    def _load(self, ids: Sequence[uuid.UUID]) -> list[_Row]:
        cap = CONTENT_CAP_CHARS
        with self.pool.connection() as conn:
            rows = conn.execute(_LOAD, (list(ids),)).fetchall()
        out = []
        for oid, ns, parent, title, summary, props, content, parent_title, hsh, event in rows:
            if parent is None:
                text = entity_index_text(title, summary, props or {}, content,
                                         content_cap_chars=cap)
            else:
                text = part_index_text(parent_title, content or "")
            text = embedder_text(text, cap_chars=EMBED_TEXT_CAP_CHARS)
            out.append(_Row(oid, ns, parent, text, hsh, event))
        return out

    def _embed_batch(self, ids: Sequence[uuid.UUID], stats: EmbedStats) -> None:
        hits, rows = self.reuse.split(self.pool, stored_vectors, self._load(ids),
                                      lambda row: (row.namespace_id, row.index_text_hash))
        if hits:
            self._store([row for row, _ in hits], np.stack([v for _, v in hits]), stats,
                        reused=True)
        if rows:  # what no stored vector answered goes to the model
            metrics.EMBED_BATCH.observe(len(rows))
            self._embed_rows(rows, stats)

    def _embed_rows(self, rows: Sequence[_Row], stats: EmbedStats) -> None:
        """Embed and store `rows`; a batch the embedder refuses is halved until each refused
        text is alone (see the module docstring)."""
        def call(batch: Sequence[_Row]) -> np.ndarray[Any, Any]:
            with metrics.EMBED_SECONDS.time():
                return embed_distinct(self.embedder, [row.text for row in batch])

        attempts = EMBED_RETRY_ATTEMPTS

        def fail(batch: Sequence[_Row], exc: BrainstreamError) -> None:
            self._fail(batch, give_up_error(exc, EmbeddingFailed, attempts=attempts,
                                            what="embedding",
                                            refused="the embedder refused this text"), stats)

        isolate_refused(
            rows, call, store=lambda batch, vectors: self._store(batch, vectors, stats),
            fail=fail, attempts=attempts, max_wait=EMBED_RETRY_MAX_WAIT,
            on_retry=lambda n, exc: log.warning("embedding attempt %d failed: %s", n, exc),
            on_split=lambda n, exc: log.warning(
                "the embedder refused a batch of %d texts (%s: %s); isolating the text", n,
                exc.code, exc.message))

    def _store(self, rows: Sequence[_Row], vectors: np.ndarray[Any, Any],
               stats: EmbedStats, *, reused: bool = False) -> None:
        # The write-back locks many rows that a consumer batch (or the sweep applying deferred
        # links) may lock in another order: Postgres then aborts one side as a deadlock. The
        # consumer retries its batch; here the vectors are in hand, so the transaction is
        # retried too (before, the task failed and the rows waited out their lease, 120 s by
        # default, to be embedded again; seen in the fault suite's Postgres restart catch-up).
        retry_transient(lambda: self._store_once(rows, vectors, stats, reused), attempts=5,
                        max_wait=2.0, transient=(psycopg.errors.TransactionRollback,),
                        on_retry=lambda n, exc: log.warning("embedding write-back attempt %d "
                                                            "rolled back: %s", n, exc))

    def _store_once(self, rows: Sequence[_Row], vectors: np.ndarray[Any, Any],
                    stats: EmbedStats, reused: bool) -> None:
        model = self.reuse.model
        params = sorted(((vector, row.index_text_hash, model, row.id, row.index_text_hash)
                         for row, vector in zip(rows, vectors, strict=True)),
                        key=lambda p: p[3])  # one row order for every writer
        roots = sorted({row.root for row in rows})
        with self.pool.connection() as conn, conn.transaction():
            # Workers finishing rows of the same root serialize here; otherwise each could see
            # the other's rows as still pending and neither would hand the root to the graph.
            # `roots` is sorted, and unnest keeps array order: locks are taken in one global
            # order, so two workers cannot deadlock.
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(r::text, 0))"
                         " FROM unnest(%s::uuid[]) AS r", (roots,))
            with conn.cursor() as cur:
                cur.executemany(
                    "UPDATE object_embeddings SET embedding = %s, embedded_hash = %s, model = %s,"
                    " embed_status = 'done', embed_lease_until = NULL, embed_error = NULL"
                    " WHERE id = %s AND index_text_hash = %s"
                    # a put gave the row its own vector since the claim: the caller's wins
                    " AND coalesce(model, '') NOT LIKE 'caller:%%'",
                    params,
                )
            # A root is ready for the graph once it and all its parts are embedded.
            done = conn.execute(
                "SELECT r.id, r.namespace_id FROM objects r WHERE r.id = ANY(%s)"
                " AND r.parent_id IS NULL AND r.deleted_at IS NULL"
                " AND NOT EXISTS (SELECT 1 FROM object_embeddings x JOIN objects y ON y.id = x.id"
                "   WHERE x.root_id = r.id AND x.embed_status = 'pending'"
                "   AND y.deleted_at IS NULL)",
                (roots,),
            ).fetchall()
            outbox.enqueue_many(conn, [outbox.Entry(ns, root, NODE_SYNC) for root, ns in done])
        if reused:
            stats.reused += len(rows)
            metrics.EMBED_REUSED.inc(len(rows))
        else:
            stats.embedded += len(rows)
        stats.roots_completed += len(done)

    def _fail(self, rows: Sequence[_Row], error: EmbeddingFailed, stats: EmbedStats) -> None:
        """The rows cannot be embedded: mark them failed and dead-letter the reason."""
        log.error("%s (%d rows)", error.message, len(rows))
        if self.dead_letters is not None:
            letters = []
            for row in rows:
                value = json.dumps({"id": str(row.id), "namespace": str(row.namespace_id),
                                    "parent_id": str(row.parent_id) if row.parent_id else None,
                                    "event_id": row.event_id}).encode()
                headers = dead_letter_headers(error, topic="embedding", partition=-1, offset=-1,
                                              event_id=row.event_id)
                letters.append((str(row.root).encode(), value, headers))
            try:
                self.dead_letters.send(letters)
            except Unavailable:
                # Not marked failed: the lease expires and the rows are tried again later.
                log.error("dead-letter topic unavailable; leaving rows pending")
                return
        metrics.EMBED_FAILURES.inc(len(rows))
        stats.failed += len(rows)
        with self.pool.connection() as conn, conn.transaction():
            conn.execute(
                "UPDATE object_embeddings SET embed_status = 'failed', embed_error = %s,"
                " embed_attempts = embed_attempts + 1, embed_lease_until = NULL"
                " WHERE id = ANY(%s) AND embed_status = 'pending'",
                (error.message[:2000], [row.id for row in rows]),
            )
            # The graph still gets the node (without a vector) so links and text search work.
            roots = sorted({(row.root, row.namespace_id) for row in rows})
            outbox.enqueue_many(conn, [outbox.Entry(ns, root, NODE_SYNC) for root, ns in roots])


# Stored vectors of objects' texts by (namespace, index text hash): `embedded_hash` is the hash
# of the index text the row's vector was computed from (migration 0042's index)
stored_vectors = lookup_in("object_embeddings", "embedded_hash")


def claim(conn: psycopg.Connection[Any], roots: Sequence[uuid.UUID] | None, *, lease: float,
          limit: int) -> list[uuid.UUID]:
    """Lease up to `limit` pending visible rows (of `roots`, or any), oldest first; their ids."""
    rows = conn.execute(_CLAIM, {"lease": lease, "roots": list(roots) if roots is not None
                                 else None, "limit": limit}).fetchall()
    return [row[0] for row in rows]


def pending_count(pool: ConnectionPool, *, older_than: float = 0.0) -> int:
    """Rows waiting for an embedding; with `older_than`, only those nobody is working on that
    have waited that many seconds (what the sweep must re-trigger: a live task will get the
    others, and claiming them in a big sweep batch would delay the documents they belong to)."""
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*) FROM object_embeddings e JOIN objects o ON o.id = e.id"
            " WHERE e.embed_status = 'pending' AND o.deleted_at IS NULL"
            " AND (%(age)s = 0 OR (e.queued_at < now() - make_interval(secs => %(age)s)"
            " AND (e.embed_lease_until IS NULL OR e.embed_lease_until < now())))",
            {"age": older_than}).fetchone()
    return int(row[0]) if row else 0


def counts_by_status(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """Visible rows per embedding status (`pending`, `done`, `failed`; absent ones have none),
    for `brainstream status` and the metrics exporter."""
    rows = conn.execute("SELECT e.embed_status, count(*) FROM object_embeddings e"
                        " JOIN objects o ON o.id = e.id WHERE o.deleted_at IS NULL"
                        " GROUP BY e.embed_status").fetchall()
    return {str(status): int(count) for status, count in rows}
