"""Entity name vectors, for the resolver's embedding layer: written by the proposal pass just
before it examines the entities (`pipeline/entities/merging.py: propose_all`), not by the
extraction stage, so a burst's extraction never pays the HNSW insert of every new name (issue
11); and by `brainstream entities backfill` for whatever is left without one.

The pass embeds the whole queue before each round, so an entity examined in one round finds the
names of entities another round will examine (as when the vectors were written at creation),
then the round's own entities that still lack one (created since). An embedder failure leaves the
names without a vector and never fails the pass: they still resolve by their text, and backfill
embeds them later. A name this model already embedded in the namespace (a merged entity's, or the
live generation's during a replay) takes the stored vector (`pipeline/embedding/reuse.py`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from pipeline.domain.index_text import text_hash
from pipeline.embedding.reuse import VectorReuse, stored_or_embedded
from pipeline.entities.store import name_vectors as store
from pipeline.entities.store.name_vectors import QueuePosition, Unvectored
from pipeline.ports import Embedder

log = logging.getLogger(__name__)


def _vectors(conn: psycopg.Connection[Any], embedder: Embedder, rows: Sequence[Unvectored],
             reuse: VectorReuse | None) -> tuple[list[Any], list[str], str]:
    """The rows' name vectors (stored ones, the rest embedded), the names' hashes, the model
    key; the embedder's errors propagate."""
    reuse = reuse or VectorReuse.of(embedder)
    keys = [(ns, text_hash(name)) for _, ns, name in rows]
    found = reuse.find_on(conn, store.stored_vectors, keys)
    return (stored_or_embedded(embedder, [name for _, _, name in rows], keys, found),
            [text for _, text in keys], reuse.model)


def _embed_and_store(conn: psycopg.Connection[Any], embedder: Embedder,
                     rows: Sequence[Unvectored], reuse: VectorReuse | None) -> int | None:
    """Store the rows' name vectors; None when the embedder failed."""
    try:
        vectors, hashes, model = _vectors(conn, embedder, rows, reuse)
    except Exception as exc:  # a name without a vector still resolves by its text
        log.warning("entity name embedding failed (%s); leaving %d names without a vector",
                    exc, len(rows))
        return None
    return store.store(conn, [entity_id for entity_id, _, _ in rows], vectors, hashes, model)


def embed_queued(pool: ConnectionPool, embedder: Embedder, *, batch: int,
                 reuse: VectorReuse | None = None) -> int | None:
    """Give every entity waiting for the proposal pass a name vector; how many were stored, or
    None when the embedder failed (the pass then goes on without asking it again: a dead
    embedder must not cost a timeout per round)."""
    done = 0
    after: QueuePosition | None = None
    while True:
        with pool.connection() as conn:
            rows, after = store.queued_page(conn, batch, after=after)
            stored = _embed_and_store(conn, embedder, rows, reuse) if rows else 0
        if stored is None:
            return None
        done += stored
        if len(rows) < batch:
            return done


def embed_claimed(conn: psycopg.Connection[Any], embedder: Embedder,
                  ids: Sequence[uuid.UUID], *, reuse: VectorReuse | None = None) -> int:
    """In the pass's transaction: vectors for the claimed entities still without one."""
    rows = store.queued_without(conn, len(ids), ids) if ids else []
    return (_embed_and_store(conn, embedder, rows, reuse) or 0) if rows else 0


def embed_names(pool: ConnectionPool, embedder: Embedder, namespace: uuid.UUID | None, *,
                batch: int, reuse: VectorReuse | None = None) -> int:
    """Give every live entity (of `namespace`, or all) without a name vector one; the count
    (`brainstream entities backfill`). An embedder failure here is the caller's error."""
    done, after = 0, uuid.UUID(int=0)
    while True:
        with pool.connection() as conn:
            rows = store.live_without(conn, namespace, after, batch)
        if not rows:
            return done
        with pool.connection() as conn:
            vectors, hashes, model = _vectors(conn, embedder, rows, reuse)
            done += store.store(conn, [entity_id for entity_id, _, _ in rows], vectors, hashes,
                                model)
        after = rows[-1][0]
