"""Entity name vectors, for the resolver's embedding layer: written by the proposal pass just
before it examines the entities (`pipeline/entities/merging.py: propose_all`), not by the
extraction stage, so a burst's extraction never pays the HNSW insert of every new name (issue
11); and by `brainstream entities backfill` for whatever is left without one.

The pass embeds the whole queue before each round, so an entity examined in one round finds the
names of entities another round will examine (as when the vectors were written at creation),
then the round's own entities that still lack one (created since). An embedder failure leaves the
names without a vector and never fails the pass: they still resolve by their text, and backfill
embeds them later.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from pipeline.entities.store import name_vectors as store
from pipeline.entities.store.name_vectors import Unvectored
from pipeline.ports import Embedder

log = logging.getLogger(__name__)


def _embed_and_store(conn: psycopg.Connection[Any], embedder: Embedder,
                     rows: Sequence[Unvectored]) -> int | None:
    """Store the rows' name vectors; None when the embedder failed."""
    try:
        vectors = embedder.embed([name for _, _, name in rows])
    except Exception as exc:  # a name without a vector still resolves by its text
        log.warning("entity name embedding failed (%s); leaving %d names without a vector",
                    exc, len(rows))
        return None
    return store.store(conn, [entity_id for entity_id, _, _ in rows], list(vectors))


def embed_queued(pool: ConnectionPool, embedder: Embedder, *, batch: int) -> int | None:
    """Give every entity waiting for the proposal pass a name vector; how many were stored, or
    None when the embedder failed (the pass then goes on without asking it again: a dead
    embedder must not cost a timeout per round)."""
    done = 0
    while True:
        with pool.connection() as conn:
            rows = store.queued_without(conn, batch)
            stored = _embed_and_store(conn, embedder, rows) if rows else 0
        if stored is None:
            return None
        done += stored
        if len(rows) < batch:
            return done


def embed_claimed(conn: psycopg.Connection[Any], embedder: Embedder,
                  ids: Sequence[uuid.UUID]) -> int:
    """In the pass's transaction: vectors for the claimed entities still without one."""
    rows = store.queued_without(conn, len(ids), ids) if ids else []
    return (_embed_and_store(conn, embedder, rows) or 0) if rows else 0


def embed_names(pool: ConnectionPool, embedder: Embedder, namespace: uuid.UUID | None, *,
                batch: int) -> int:
    """Give every live entity (of `namespace`, or all) without a name vector one; the count
    (`brainstream entities backfill`). An embedder failure here is the caller's error."""
    done, after = 0, uuid.UUID(int=0)
    while True:
        with pool.connection() as conn:
            rows = store.live_without(conn, namespace, after, batch)
        if not rows:
            return done
        vectors = embedder.embed([name for _, _, name in rows])
        with pool.connection() as conn:
            done += store.store(conn, [entity_id for entity_id, _, _ in rows], list(vectors))
        after = rows[-1][0]
