"""The kind catalog in Postgres (`object_kinds`): read it (one query, for the write path, the
operator commands and the read API), apply a file additively, and a short-lived cache of it for
the API (`CachedCatalog`, a `CatalogSource`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from pipeline.domain.kinds import (
    KindCatalog,
    KindSpec,
    catalog_from_dict,
    catalog_to_dict,
    merge_catalog,
)
from pipeline.domain.relations import RelationSpec
from pipeline.postgres.pool import AsyncConn

_KINDS_LOCK = 0x6272_6169_6E6B  # serialize concurrent applies

# The catalog: one spec document per kind, in kind order.
CATALOG_SQL = "SELECT spec FROM object_kinds ORDER BY kind"
# The relation types of the catalog (migration 0050), in type order.
RELATIONS_SQL = "SELECT relation_type, spec FROM relation_types ORDER BY relation_type"


def _specs(rows: Sequence[tuple[Any, ...]]) -> list[KindSpec]:
    return catalog_from_dict({"kinds": [row[0] for row in rows]})


def read_catalog(conn: psycopg.Connection[Any]) -> list[KindSpec]:
    """The stored catalog's specs, in kind order (empty: open mode)."""
    return _specs(conn.execute(CATALOG_SQL).fetchall())


async def read_catalog_async(conn: AsyncConn) -> list[KindSpec]:
    """`read_catalog` on an async connection."""
    cur = await conn.execute(CATALOG_SQL)
    return _specs(await cur.fetchall())


def _relation(relation_type: str, spec: dict[str, Any]) -> RelationSpec:
    # the type is the row's key; `functional` counts only as JSON true, as the fact reads test it
    return RelationSpec(relation_type, spec.get("description", ""),
                        spec.get("functional") is True)


def read_relations(conn: psycopg.Connection[Any]) -> list[RelationSpec]:
    """The stored relation types, in type order."""
    return [_relation(row[0], row[1]) for row in conn.execute(RELATIONS_SQL).fetchall()]


async def read_relations_async(conn: AsyncConn) -> list[RelationSpec]:
    """`read_relations` on an async connection."""
    cur = await conn.execute(RELATIONS_SQL)
    return [_relation(row[0], row[1]) for row in await cur.fetchall()]


def apply_relations(conn: psycopg.Connection[Any], incoming: Sequence[RelationSpec]) -> None:
    """Upsert relation types (a declared type's description and `functional` are replaced;
    none is removed), in one transaction. Turning `functional` on or off changes how the
    events from then on cut a group, not the versions already written."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_KINDS_LOCK,))
        for spec in incoming:
            conn.execute(
                "INSERT INTO relation_types (relation_type, spec) VALUES (%s, %s)"
                " ON CONFLICT (relation_type) DO UPDATE SET spec = EXCLUDED.spec,"
                " updated_at = now() WHERE relation_types.spec IS DISTINCT FROM EXCLUDED.spec",
                (spec.type, Jsonb(spec.to_dict())))


def apply_catalog(conn: psycopg.Connection[Any], incoming: Sequence[KindSpec]) -> list[KindSpec]:
    """Merge `incoming` into the stored catalog (additive upsert) in one transaction."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_KINDS_LOCK,))
        merged = merge_catalog(read_catalog(conn), incoming)
        for spec in catalog_to_dict(merged)["kinds"]:
            conn.execute(
                "INSERT INTO object_kinds (kind, spec) VALUES (%s, %s)"
                " ON CONFLICT (kind) DO UPDATE SET spec = EXCLUDED.spec, updated_at = now()"
                " WHERE object_kinds.spec IS DISTINCT FROM EXCLUDED.spec",
                (spec["kind"], Jsonb(spec)),
            )
    return merged


class CachedCatalog:
    """The kind catalog, re-read at most every `ttl` seconds (kinds change rarely); calling it
    gives the catalog in force (a `pipeline.ports.CatalogSource`)."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn], ttl: float = 5.0) -> None:
        self.pool = pool
        self.ttl = ttl
        self._value: KindCatalog | None = None
        self._at = 0.0
        self._lock = asyncio.Lock()

    async def __call__(self) -> KindCatalog:
        async with self._lock:
            if self._value is None or time.monotonic() - self._at > self.ttl:
                async with self.pool.connection() as conn:
                    self._value = KindCatalog(await read_catalog_async(conn),
                                              await read_relations_async(conn))
                self._at = time.monotonic()
            return self._value
