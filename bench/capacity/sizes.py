"""What the data occupy, for the capacity benchmark: every Postgres relation (heap, TOAST and
each index apart, with its access method), the Tantivy index on disk, FalkorDB's memory, and a
PPR snapshot's memory, each with the counts it is divided by."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tracemalloc
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import redis

from pipeline.retrieval.ppr.snapshot import EntitySnapshot
from pipeline.retrieval.store.ppr_snapshot import PgSnapshotBuild
from pipeline.settings import Settings


@dataclass(frozen=True)
class Relation:
    """One relation's bytes: a table's heap (`kind` table), its TOAST, or one index (`kind` its
    access method: btree, gin, gist, hnsw)."""

    table: str
    name: str
    kind: str
    bytes: int


# heap + TOAST per table, and every index on its own; the TOAST's own index counted with it
_RELATIONS = """
SELECT c.relname, c.relname, 'table', pg_relation_size(c.oid)
       + pg_relation_size(c.oid, 'fsm') + pg_relation_size(c.oid, 'vm')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind = 'r'
UNION ALL
SELECT c.relname, c.relname || ' (TOAST)', 'toast', pg_total_relation_size(c.reltoastrelid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.reltoastrelid <> 0
UNION ALL
SELECT t.relname, i.relname, a.amname, pg_relation_size(i.oid)
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_am a ON a.oid = i.relam JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = 'public'
"""


def relations(settings: Settings) -> list[Relation]:
    """Every relation of the public schema with its current bytes."""
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        rows = conn.execute(_RELATIONS).fetchall()
    return [Relation(r[0], r[1], r[2], int(r[3])) for r in rows]


def counts(settings: Settings, namespace: uuid.UUID) -> dict[str, int]:
    """Documents, parts, links, entities and mentions of a namespace."""
    queries = {
        "documents": "SELECT count(*) FROM objects WHERE namespace_id = %s AND parent_id IS NULL",
        "parts": "SELECT count(*) FROM objects WHERE namespace_id = %s AND parent_id IS NOT NULL",
        "links": "SELECT count(*) FROM links WHERE namespace_id = %s",
        "entities": "SELECT count(*) FROM entities WHERE namespace_id = %s",
        "mentions": "SELECT count(*) FROM mentions WHERE namespace_id = %s"}
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        return {key: int(conn.execute(q, (namespace,)).fetchone()[0])  # type: ignore[index]
                for key, q in queries.items()}


def tantivy_bytes(settings: Settings) -> int:
    """Bytes of the lexical index's files under DATA_DIR/lexical."""
    total = 0
    for root, _, files in os.walk(Path(settings.resolved_data_dir) / "lexical"):
        for name in files:
            with contextlib.suppress(OSError):  # a segment merged away while walking
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def falkordb_memory(settings: Settings) -> dict[str, Any]:
    """FalkorDB's `INFO memory` used_memory, the graph's nodes and edges, and its own
    `GRAPH.MEMORY USAGE` breakdown where the server has the command."""
    client = redis.Redis.from_url(settings.effective_falkordb_url)
    try:
        out: dict[str, Any] = {"used_memory": int(client.info("memory")["used_memory"])}
        graph = settings.graph_name
        if client.exists(graph):
            for key, query in (("nodes", "MATCH (n) RETURN count(n)"),
                               ("edges", "MATCH ()-[e]->() RETURN count(e)")):
                reply = client.execute_command(  # type: ignore[no-untyped-call]
                    "GRAPH.RO_QUERY", graph, query)
                out[key] = int(reply[1][0][0])
            with contextlib.suppress(redis.ResponseError):
                usage = client.execute_command(  # type: ignore[no-untyped-call]
                    "GRAPH.MEMORY", "USAGE", graph)
                pairs = (usage.items() if isinstance(usage, dict)
                         else zip(usage[::2], usage[1::2], strict=True))
                out["graph_memory"] = {_text(k): _flat(v) for k, v in pairs}
        return out
    finally:
        client.close()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _flat(value: object) -> str:
    """A reply value as text; a nested map (per label, per type) as `key value` pairs."""
    if isinstance(value, dict):
        return " ".join(f"{_text(k)} {_text(v)}" for k, v in value.items())
    return _text(value)


@dataclass(frozen=True)
class SnapshotMemory:
    """A namespace's PPR snapshot: what it holds, the bytes it allocated (tracemalloc, numpy's
    arrays included), and the bound's estimate of them (`EntitySnapshot.nbytes`)."""

    entities: int
    rows: int
    pairs: int
    links: int
    allocated: int
    estimated: int


def snapshot_memory(settings: Settings, namespace: uuid.UUID) -> SnapshotMemory:
    """Build the namespace's PPR snapshot as the API does and measure what it holds."""
    async def build() -> SnapshotMemory:
        conn = await psycopg.AsyncConnection.connect(settings.effective_postgres_dsn,
                                                     autocommit=True)
        async with conn:
            session = PgSnapshotBuild(conn)
            size = await session.count(namespace)
            tracemalloc.start()
            try:
                data = await session.build(namespace, lambda _: 1 << 62)
                snap = EntitySnapshot(namespace, data, 0.0)
                del data  # what stays held is the snapshot, not the rows it was built from
                allocated, _ = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
        counted = snap.counts()
        return SnapshotMemory(counted["entities"], counted["rows"], size.pairs,
                              counted["links"], allocated, snap.nbytes())
    return asyncio.run(build())


@dataclass(frozen=True)
class Sizes:
    """Everything `measure` reads at one point of the load."""

    counts: dict[str, int]
    relations: list[Relation]
    tantivy_bytes: int
    falkordb: dict[str, Any]
    snapshot: SnapshotMemory

    def relation_bytes(self) -> dict[str, int]:
        """Bytes per relation name."""
        return {r.name: r.bytes for r in self.relations}


def measure(settings: Settings, namespace: uuid.UUID) -> Sizes:
    """The sizes of every store now, with the namespace's counts and its PPR snapshot."""
    return Sizes(counts(settings, namespace), relations(settings), tantivy_bytes(settings),
                 falkordb_memory(settings), snapshot_memory(settings, namespace))
