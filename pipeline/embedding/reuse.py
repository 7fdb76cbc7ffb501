"""Reusing stored vectors: a text a model embedded once is not embedded again by that model in
the same namespace.

Every vector is stored on the row it belongs to (an object's row of `object_embeddings`, a
message, an entity's name vector) with the hash of its text and the key of the model that
computed it (`pipeline/embedding/identity.py`); a lookup by (namespace, text hash, model key)
finds it. A lookup never crosses namespaces: a vector found for another tenant's text would tell
one tenant what another has stored. Deleting the row (purge, a purged session, a deleted entity)
deletes its vector, so nothing is kept for a text no row holds any more.

A replay builds a new generation while the live one keeps its vectors: it looks in its own
database first, then in the live generation's (the source), and stores what it finds on its own
rows, so a switched generation holds every vector itself and the old one can be dropped.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from pipeline.embedding.identity import model_key
from pipeline.ports import Embedder

log = logging.getLogger(__name__)

# (namespace, text hash): what a stored vector is found by, with the model key
Key = tuple[uuid.UUID, str]
# one wing's statement: the stored vectors of `keys` computed by `model`, by key
Lookup = Callable[[psycopg.Connection[Any], str, Sequence[Key]], dict[Key, Any]]
Item = TypeVar("Item")


@dataclass(frozen=True)
class VectorReuse:
    """Where stored vectors of one model are looked up: the caller's database, then `source`
    (another generation's database: a replay's live one; None for the live pipeline)."""

    model: str
    source: ConnectionPool | None = None

    @classmethod
    def of(cls, embedder: Embedder, source: ConnectionPool | None = None) -> VectorReuse:
        """Reuse for the vectors `embedder` computes."""
        return cls(model_key(embedder), source)

    def find(self, pool: ConnectionPool, lookup: Lookup, keys: Sequence[Key]
             ) -> dict[Key, Any]:
        """The stored vectors of `keys` (a key without a hash is never found)."""
        if not any(key[1] for key in keys):
            return {}
        with pool.connection() as conn:
            return self.find_on(conn, lookup, keys)

    def find_on(self, conn: psycopg.Connection[Any], lookup: Lookup, keys: Sequence[Key]
                ) -> dict[Key, Any]:
        """`find` with the caller's connection to its own database (inside its transaction)."""
        wanted = list(dict.fromkeys(key for key in keys if key[1]))
        if not wanted:
            return {}
        found = lookup(conn, self.model, wanted)
        missing = [key for key in wanted if key not in found]
        if missing and self.source is not None:
            try:
                with self.source.connection() as source:
                    found.update(lookup(source, self.model, missing))
            except (psycopg.Error, PoolTimeout) as exc:
                # the source is an optimisation: without it the texts are embedded again
                log.warning("stored vectors of the source generation unavailable (%s); "
                            "embedding %d texts", exc, len(missing))
        return found

    def split(self, pool: ConnectionPool, lookup: Lookup, items: Sequence[Item],
              key: Callable[[Item], Key]) -> tuple[list[tuple[Item, Any]], list[Item]]:
        """`items` as (item, stored vector) pairs found, and the items left to embed."""
        keys = [key(item) for item in items]
        found = self.find(pool, lookup, keys)
        hits = [(item, found[k]) for item, k in zip(items, keys, strict=True) if k in found]
        return hits, [item for item, k in zip(items, keys, strict=True) if k not in found]


def stored_or_embedded(embedder: Embedder, texts: Sequence[str], keys: Sequence[Key],
                       found: dict[Key, Any]) -> list[Any]:
    """Each text's vector: the stored one of its key in `found`, else the embedder's (one call
    for every text without one); the embedder's errors propagate."""
    todo = [i for i, key in enumerate(keys) if key not in found]
    fresh = dict(zip(todo, embedder.embed([texts[i] for i in todo]), strict=True)) if todo else {}
    return [fresh[i] if i in fresh else found[key] for i, key in enumerate(keys)]


def lookup_in(table: str, hash_column: str) -> Lookup:
    """The lookup of stored vectors in `table` (a wing's own: `object_embeddings`, `messages`,
    `entity_name_vectors`), whose rows hold `namespace_id`, the text's hash in `hash_column`,
    `model` and `embedding`. Any row of the key answers: equal keys hold equal vectors."""
    statement = sql.SQL(
        "SELECT DISTINCT ON (t.namespace_id, t.{hash}) t.namespace_id, t.{hash}, t.embedding"
        " FROM {table} t JOIN unnest(%(ns)s::uuid[], %(hash)s::text[]) AS k (ns, hash)"
        "   ON t.namespace_id = k.ns AND t.{hash} = k.hash"
        " WHERE t.model = %(model)s AND t.embedding IS NOT NULL").format(
            table=sql.Identifier(table), hash=sql.Identifier(hash_column))

    def lookup(conn: psycopg.Connection[Any], model: str, keys: Sequence[Key]
               ) -> dict[Key, Any]:
        rows = conn.execute(statement, {"ns": [ns for ns, _ in keys],
                                        "hash": [text for _, text in keys],
                                        "model": model}).fetchall()
        return {(ns, text_hash): vector for ns, text_hash, vector in rows}

    return lookup
